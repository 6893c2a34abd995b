"""``capacity=CapacityFallback(...)`` and ``prices=PriceSettings``: one value each for what took three arguments;
the old spellings still work for one release, with a warning that says what to write instead."""

from __future__ import annotations

import importlib
import warnings
from typing import Any

import pytest
from support.example_jobs import example_job

from airflow_hetero.operators import CapacityFallback, HeteroTrainingOperator
from airflow_hetero.pricing.settings import PriceSettings

JOB = example_job()
TYPES = {JOB["instance_groups"][1]["instance_group_name"]: ["ml.p4d.24xlarge", "ml.g5.48xlarge"]}


def operator(**kwargs: Any) -> HeteroTrainingOperator:
    return HeteroTrainingOperator(**{"task_id": "train", "aws_conn_id": None, "job": JOB, **kwargs})


def test_capacity_holds_what_the_three_arguments_held() -> None:
    op = operator(capacity=CapacityFallback(TYPES, attempts=2, retry_delay=30))
    assert (op.fallback_instance_types, op.capacity_attempts, op.capacity_retry_delay) == (TYPES, 2, 30.0)
    as_dict = operator(capacity={"types": TYPES, "attempts": 2, "retry_delay": 30})
    assert as_dict.fallback_instance_types == TYPES and as_dict.capacity_attempts == 2
    plain = operator()
    assert (plain.fallback_instance_types, plain.capacity_attempts, plain.capacity_retry_delay) == (None, None, 0.0)


def test_the_old_spellings_work_and_say_what_to_write_instead() -> None:
    with pytest.warns(DeprecationWarning, match=r"write capacity=CapacityFallback\(types=\.\.\., attempts"):
        op = operator(fallback_instance_types=TYPES, capacity_attempts=2)
    assert (op.fallback_instance_types, op.capacity_attempts) == (TYPES, 2)
    with pytest.warns(DeprecationWarning, match=r"write prices=PriceSettings.of\(prices, currency"):
        priced = operator(prices={"ml.c5.xlarge": 0.2}, currency="EUR")
    assert priced.price_settings.currency == "EUR" and dict(priced.price_settings.overrides) == {"ml.c5.xlarge": 0.2}


def test_the_new_spellings_warn_of_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        op = operator(capacity=CapacityFallback(TYPES), prices=PriceSettings.of({"ml.c5.xlarge": 0.2}, "EUR", False))
    assert op.price_settings.currency == "EUR" and op.price_settings.use_api is False


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"capacity": CapacityFallback(TYPES), "capacity_attempts": 2}, "give capacity= or capacity_attempts, not"),
        ({"prices": PriceSettings.of({}), "currency": "EUR"}, r"give prices=PriceSettings.of\(\.\.\.\) or currency"),
        ({"capacity": {"types": TYPES, "attempt": 2}}, r"capacity: unknown key\(s\) \['attempt'\]"),
        ({"capacity": "ml.p4d.24xlarge"}, "capacity: a CapacityFallback or a dict, got str"),
    ],
)
def test_a_mixed_or_unknown_spelling_fails_the_parse_naming_it(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        operator(**kwargs)


@pytest.mark.parametrize(("attempts", "delay"), [(0, 0), (True, 0), (1.5, 0), (None, -1), (None, "5")])
def test_bad_attempts_or_delay_fail_the_parse(attempts: Any, delay: Any) -> None:
    with pytest.raises(ValueError, match=r"capacity: attempts must be None or an integer >= 1 and retry_delay"):
        CapacityFallback(TYPES, attempts=attempts, retry_delay=delay)


def test_bad_fallback_types_fail_the_parse_naming_the_group() -> None:
    with pytest.raises(ValueError, match=r"ml\.bogus"):
        operator(capacity=CapacityFallback({"data_group": ["ml.bogus"]}))


def test_the_old_spellings_in_default_args_still_apply_with_the_warning() -> None:
    """Airflow fills only a signature's parameters from ``default_args``: the old spellings left the signature,
    so the operator reads them from ``default_args`` itself (an explicit argument wins)."""
    from airflow_hetero._compat import AIRFLOW_V_3

    dag_class: Any = importlib.import_module("airflow.sdk" if AIRFLOW_V_3 else "airflow").DAG
    defaults = {"capacity_attempts": 2, "currency": "EUR", "use_pricing_api": False}
    with dag_class("old_defaults", schedule=None, default_args=defaults):
        with pytest.warns(DeprecationWarning, match=r"capacity_attempts= is deprecated"):
            op = operator()
        with pytest.warns(DeprecationWarning, match=r"capacity_attempts=, capacity_retry_delay= are deprecated"):
            explicit = operator(task_id="train_explicit", capacity_retry_delay=5, capacity_attempts=3)
    assert op.capacity_attempts == 2 and op.price_settings == PriceSettings({}, "EUR", False)
    assert (explicit.capacity_attempts, explicit.capacity_retry_delay) == (3, 5.0)
