"""summarize_training_job's grouped specs (series=, verdict=, cost=, as build_summary takes them) against moto, and
the flat keywords they replace: still working for one release with a DeprecationWarning saying what to write, the
same summary, and refused beside the spec they spell."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from unittest.mock import MagicMock

import boto3
import pytest
from moto import mock_aws
from support.verdict_jobs import data_and_train, put_job

from airflow_hetero.logs import CostSpec, SeriesSpec, Thresholds, VerdictSpec, summarize_training_job
from airflow_hetero.logs.flat_keywords import FLAT_KEYWORDS
from airflow_hetero.pricing.price_list import Price

TYPES = ["ml.c5.18xlarge", "ml.p4d.24xlarge"]  # the job of support.verdict_jobs, sorted
PRICES = {t: Price(t, per_hour, "EUR") for t, per_hour in zip(TYPES, (3.0, 30.0), strict=True)}
STRICT = {"busy_percent": 75}


@pytest.fixture
def aws() -> Iterator[dict[str, Any]]:
    with mock_aws():
        clients = {
            f"{service}_client": boto3.client(service, region_name="us-east-1")
            for service in ("sagemaker", "logs", "cloudwatch")
        }
        clients["sagemaker_client"] = put_job(clients, "specs", data_and_train(cpu=80, gpu=45))
        yield clients


def summary(aws: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    result: dict[str, Any] = summarize_training_job("specs", **aws, metric_definitions=[], **kwargs)
    json.dumps(result)
    return result


def new_form(prices: Any = PRICES) -> dict[str, Any]:
    return {
        "series": SeriesSpec(points=3),
        "verdict": VerdictSpec(Thresholds.of(STRICT)),
        "cost": CostSpec(prices, "EUR"),
    }


def test_the_specs_ask_for_the_series_the_verdict_and_the_cost(aws: dict[str, Any]) -> None:
    result = summary(aws, **new_form())
    assert result["groups"]["train_group"]["series"]["points"] == 3
    assert result["verdict"]["thresholds"]["busy_percent"] == 75
    assert result["verdict"]["bottleneck"] == "data_group"  # 80 % CPU is busy at 75 %, not at the default 85 %
    cost = result["cost"]
    assert cost["currency"] == "EUR" and cost["total"] == round((2 * 3.0 + 30.0) * 600 / 3600, 4)
    plain = summary(aws)  # none given: 60 points (at most one a datapoint), the default thresholds, no cost
    assert 3 < plain["groups"]["train_group"]["series"]["points"] <= 60
    assert plain["verdict"]["kind"] == "not_saturated" and "cost" not in plain


def test_a_cost_spec_takes_a_function_of_the_jobs_instance_types_asked_once(aws: dict[str, Any]) -> None:
    asked: list[list[str]] = []

    def prices(types: list[str]) -> dict[str, Price]:
        asked.append(types)
        return PRICES

    assert summary(aws, **new_form(prices)) == summary(aws, **new_form())
    assert asked == [TYPES]


def test_the_flat_keywords_warn_naming_the_specs_and_give_the_same_summary(aws: dict[str, Any]) -> None:
    with pytest.warns(DeprecationWarning) as warned:
        old = summary(aws, series_points=3, verdict_thresholds=STRICT, prices=PRICES, currency="EUR")
    assert old == summary(aws, **new_form())
    (message,) = [str(w.message) for w in warned if issubclass(w.category, DeprecationWarning)]
    assert message.startswith(
        "summarize_training_job(series_points=..., verdict_thresholds=..., prices=..., currency=...) is deprecated"
    )
    assert (
        "write summarize_training_job(series=SeriesSpec(points=...), verdict=VerdictSpec(Thresholds.of({...})), "
        "cost=CostSpec(prices=..., currency=...))"
    ) in message
    assert warned[0].filename == __file__  # the warning points at the caller's line


def test_a_flat_price_function_still_works(aws: dict[str, Any]) -> None:
    with pytest.warns(DeprecationWarning, match=r"write summarize_training_job\(cost=CostSpec"):
        old = summary(aws, prices=lambda types: PRICES, currency="EUR")
    assert old == summary(aws, cost=CostSpec(PRICES, "EUR"))


def test_a_flat_keyword_of_one_spec_beside_another_spec_is_taken(aws: dict[str, Any]) -> None:
    with pytest.warns(DeprecationWarning, match=r"series_points=\.\.\.\) is deprecated"):
        mixed = summary(aws, series_points=3, verdict=VerdictSpec(Thresholds.of(STRICT)), cost=CostSpec(PRICES, "EUR"))
    assert mixed == summary(aws, **new_form())


@pytest.mark.parametrize(
    ("flat", "spec"),
    [
        ({"prices": PRICES}, {"cost": CostSpec(PRICES)}),
        ({"currency": "EUR"}, {"cost": CostSpec(PRICES)}),
        ({"series_points": 3}, {"series": SeriesSpec(points=10)}),
        ({"verdict_thresholds": STRICT}, {"verdict": VerdictSpec()}),
    ],
    ids=["prices", "currency", "series_points", "verdict_thresholds"],
)
def test_a_flat_keyword_beside_the_spec_it_spells_is_refused_before_anything_is_read(
    flat: dict[str, Any], spec: dict[str, Any]
) -> None:
    (name,) = flat
    argument, written = FLAT_KEYWORDS[name]
    untouched = MagicMock()  # no client is called
    with pytest.raises(ValueError) as info:
        summarize_training_job(
            "j", logs_client=untouched, cloudwatch_client=untouched, sagemaker_client=untouched, **flat, **spec
        )
    assert str(info.value) == (
        f"summarize_training_job(): give {argument}= or the deprecated {name}=, not both (write {written} alone)"
    )
    assert untouched.mock_calls == []


def test_what_was_never_a_keyword_is_a_type_error_and_a_lone_currency_is_checked_then_dropped(
    aws: dict[str, Any],
) -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'series_point'"):
        summary(aws, series_point=3)
    with pytest.raises(ValueError, match="currency"):
        summary(aws, currency="euro")
    with pytest.warns(DeprecationWarning, match="currency= without prices= prices nothing and is dropped"):
        alone = summary(aws, currency="EUR")
    assert "cost" not in alone and alone == summary(aws)


def test_the_specs_check_their_values_and_a_series_axis_is_the_querys() -> None:
    with pytest.raises(ValueError, match=r"SeriesSpec: points must be an integer of at least 1, got 0"):
        SeriesSpec(points=0)
    with pytest.raises(ValueError, match="currency"):
        CostSpec(PRICES, "euro")
    untouched = MagicMock()
    with pytest.raises(ValueError, match=r"give SeriesSpec\(points=\.\.\.\) alone"):
        summarize_training_job(
            "j",
            logs_client=untouched,
            cloudwatch_client=untouched,
            sagemaker_client=untouched,
            series=SeriesSpec(points=3, axis=(0.0, 60.0)),
        )
    assert untouched.mock_calls == []
