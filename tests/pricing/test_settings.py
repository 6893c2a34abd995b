"""PriceSettings: the price arguments as one checked value, for every task and the CLI."""

from __future__ import annotations

import copy
import pickle
import warnings
from typing import Any

import pytest
from support.example_jobs import example_job

from airflow_hetero.operators import HeteroLogSummaryOperator, HeteroTrainingOperator
from airflow_hetero.pricing.price_list import PRICE_LIST_CURRENCY
from airflow_hetero.pricing.settings import PriceSettings
from airflow_hetero.sensors import HeteroTrainingSensor

#: The smallest definition that passes the parse-time check.
JOB = example_job(
    image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1",
    entry_point=None,
    source_dir=None,
    groups=None,
    instance_type="ml.c5.xlarge",
    instance_count=1,
)


def test_of_checks_and_copies_what_it_is_given() -> None:
    given = {"ml.p4d.24xlarge": 37}
    settings = PriceSettings.of(given, "EUR", use_pricing_api=False)
    assert settings == PriceSettings({"ml.p4d.24xlarge": 37.0}, "EUR", False)
    given["ml.c5.xlarge"] = 1.0
    assert dict(settings.overrides) == {"ml.p4d.24xlarge": 37.0}
    assert PriceSettings.of() == PriceSettings() == PriceSettings({}, PRICE_LIST_CURRENCY, True)
    for bad in ({"prices": {"p4d": 1}}, {"prices": {"ml.p4d.24xlarge": -1}}, {"currency": "usd"}):
        with pytest.raises(ValueError):
            PriceSettings.of(**bad)  # type: ignore[arg-type]


TASKS = [
    lambda **p: HeteroTrainingOperator(task_id="t", job=JOB, **p),
    lambda **p: HeteroTrainingSensor(task_id="s", job_name="j", **p),
    lambda **p: HeteroLogSummaryOperator(task_id="l", job_name="j", **p),
]


@pytest.mark.parametrize("make", TASKS, ids=["operator", "sensor", "summary"])
def test_each_task_takes_one_price_settings_and_keeps_it_through_copies(make: Any) -> None:
    settings = PriceSettings.of({"ml.c5.xlarge": 0.2}, "EUR", use_pricing_api=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        task = make(prices=settings)
        default = make()
    assert task.price_settings == settings and default.price_settings == PriceSettings()
    assert pickle.loads(pickle.dumps(task.price_settings)) == task.price_settings
    assert copy.deepcopy(task).price_settings == task.price_settings
    with pytest.raises(ValueError, match=r"prices: ml\.c5\.xlarge must be a price"):
        make(prices={"ml.c5.xlarge": -1})


@pytest.mark.parametrize("make", TASKS, ids=["operator", "sensor", "summary"])
def test_each_task_takes_the_old_price_trio_for_one_release_with_a_warning(make: Any) -> None:
    with pytest.warns(DeprecationWarning, match=r"currency=, use_pricing_api= are deprecated: write prices="):
        task = make(prices={"ml.c5.xlarge": 0.2}, currency="EUR", use_pricing_api=False)
    assert task.price_settings == PriceSettings({"ml.c5.xlarge": 0.2}, "EUR", False)
    with pytest.raises(ValueError, match="currency"), pytest.warns(DeprecationWarning):
        make(currency="euro")
    with pytest.raises(ValueError, match=r"give prices=PriceSettings.of\(\.\.\.\) or currency, not both"):
        make(prices=PriceSettings(), currency="EUR")
