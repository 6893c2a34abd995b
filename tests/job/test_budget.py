"""The budget's arithmetic (airflow_hetero.job.budget): the cap, the worst case, earlier attempts, refusals."""

from __future__ import annotations

import math
from typing import Any

import pytest

from airflow_hetero.amounts import format_amount
from airflow_hetero.job.budget import (
    BUDGET_TAG,
    BudgetError,
    billed_cost,
    budget_cap_in_tags,
    budget_stop_message,
    capped_request,
    check_max_cost,
    plan_budget,
    plan_request_budget,
)
from airflow_hetero.sagemaker_facts import STOP_SIGNAL_WINDOW_SECONDS

PRICES = {"ml.c5.xlarge": 0.2, "ml.p4d.24xlarge": 36.0}


def request(max_run: int | None = 86400, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "TrainingJobName": "job-3",
        "ResourceConfig": {
            "InstanceGroups": [
                {"InstanceGroupName": "data", "InstanceType": "ml.c5.xlarge", "InstanceCount": 2},
                {"InstanceGroupName": "train", "InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1},
            ]
        },
        **extra,
    }
    if max_run is not None:
        out["StoppingCondition"] = {"MaxRuntimeInSeconds": max_run}
    return out


def priced(prices: dict[str, float]) -> dict[str, tuple[float | None, str | None]]:
    return {name: (price, None) for name, price in prices.items()}


def test_the_cap_makes_the_worst_case_fit() -> None:
    plan = plan_budget(10.0, 0.0, 36.4, 86400, min_runtime=300, currency="USD")
    assert plan.runtime_cap == math.floor(10.0 * 3600 / 36.4) - STOP_SIGNAL_WINDOW_SECONDS
    assert plan.worst_case <= 10.0
    assert 36.4 * (plan.runtime_cap + 1 + plan.stop_window) / 3600 > 10.0  # one second more would not fit
    assert plan.lowered


def test_the_jobs_own_runtime_is_never_raised() -> None:
    plan = plan_budget(1000.0, 0.0, 36.4, 3600, min_runtime=300, currency="USD")
    assert plan.runtime_cap == 3600 and not plan.lowered
    assert "(the job's own)" in plan.describe("USD")


def test_a_free_cluster_keeps_its_runtime() -> None:
    assert plan_budget(1.0, 0.0, 0.0, 7200, min_runtime=300, currency="USD").runtime_cap == 7200


def test_below_the_minimum_refuses_with_what_it_needs() -> None:
    with pytest.raises(BudgetError) as info:
        plan_budget(2.0, 0.5, 36.0, 86400, min_runtime=300, stop_window=120, currency="USD")
    message = str(info.value)
    assert "1.5 left" in message and "0.5 spent" in message
    assert "minimum useful run of 300 s" in message and "nothing was submitted" in message
    assert f"{format_amount(36.0 * 420 / 3600)}" in message  # what it needs: (300 + 120) s at 36/hour


def test_a_budget_spent_by_earlier_jobs_buys_nothing() -> None:
    with pytest.raises(BudgetError, match="buys nothing"):
        plan_budget(2.0, 2.5, 1.0, 86400, min_runtime=1, currency="USD")


def test_the_request_plan_counts_earlier_billable_time() -> None:
    earlier = [
        {**request(), "TrainingJobStatus": "Stopped", "BillableTimeInSeconds": 1800},
        {**request(), "TrainingJobStatus": "Failed", "FailureReason": "CapacityError: ...", "BillableTimeInSeconds": 0},
    ]
    rate = 2 * 0.2 + 36.0
    plan = plan_request_budget(
        request(), earlier, priced(PRICES), max_cost=50.0, sources="s", min_runtime=300, currency="USD"
    )
    assert plan.spent == pytest.approx(1800 * rate / 3600)
    assert plan.per_hour == pytest.approx(rate)
    assert plan.runtime_cap == math.floor((50.0 - plan.spent) * 3600 / rate) - STOP_SIGNAL_WINDOW_SECONDS


def test_a_running_earlier_job_counts_at_its_worst_case() -> None:
    running = {**request(max_run=600), "TrainingJobStatus": "InProgress"}
    cost = billed_cost(running, PRICES)
    assert cost == pytest.approx((600 + STOP_SIGNAL_WINDOW_SECONDS) * (2 * 0.2 + 36.0) / 3600)


def test_an_unknown_price_refuses_naming_the_type_and_the_sources() -> None:
    prices = {"ml.c5.xlarge": (0.2, None), "ml.p4d.24xlarge": (None, "the Pricing API refused the call")}
    with pytest.raises(BudgetError) as info:
        plan_request_budget(
            request(), [], prices, max_cost=50.0, sources="prices= (none given)", min_runtime=1, currency="USD"
        )
    message = str(info.value)
    assert "ml.p4d.24xlarge" in message and "the Pricing API refused the call" in message
    assert "sources tried: prices= (none given)" in message and "never guesses" in message


def test_an_earlier_job_that_billed_nothing_needs_no_price() -> None:
    fallback = {
        "TrainingJobStatus": "Failed",
        "ResourceConfig": {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1},
    }
    plan = plan_request_budget(
        request(), [fallback], priced(PRICES), max_cost=50.0, sources="s", min_runtime=1, currency="USD"
    )
    assert plan.spent == 0.0


def test_capped_request_lowers_runtime_and_spot_wait_and_tags() -> None:
    spot = request(EnableManagedSpotTraining=True, Tags=[{"Key": "team", "Value": "ml"}])
    spot["StoppingCondition"]["MaxWaitTimeInSeconds"] = 86400 + 3600
    plan = plan_budget(10.0, 0.0, 36.4, 86400, min_runtime=300, currency="USD")
    out = capped_request(spot, plan)
    assert out["StoppingCondition"] == {
        "MaxRuntimeInSeconds": plan.runtime_cap,
        "MaxWaitTimeInSeconds": plan.runtime_cap + 3600,  # the wait allowance kept
    }
    assert out["Tags"] == [{"Key": "team", "Value": "ml"}, {"Key": BUDGET_TAG, "Value": str(plan.runtime_cap)}]
    assert spot["StoppingCondition"]["MaxRuntimeInSeconds"] == 86400  # the input is not changed
    assert budget_cap_in_tags(out["Tags"]) == plan.runtime_cap


def test_capped_request_without_a_stopping_condition() -> None:
    plan = plan_budget(1.0, 0.0, 0.4, requested=86400, min_runtime=300, currency="USD")
    out = capped_request(request(max_run=None), plan)
    assert out["StoppingCondition"] == {"MaxRuntimeInSeconds": plan.runtime_cap}


@pytest.mark.parametrize("value", [0, -1, "abc", True, float("inf"), "nan"])
def test_max_cost_must_be_positive(value: Any) -> None:
    with pytest.raises(BudgetError, match="max_cost must be a positive number"):
        check_max_cost(value)


def test_max_cost_from_a_template() -> None:
    assert check_max_cost("12.5") == 12.5
    assert check_max_cost(None) is None


def test_the_stop_message_names_the_budget_only_for_a_capped_job() -> None:
    stopped = {"TrainingJobName": "j", "SecondaryStatus": "MaxRuntimeExceeded", "BillableTimeInSeconds": 61}
    message = budget_stop_message(stopped, 60)
    assert message is not None and "stopped by its budget" in message and "60 s" in message
    assert budget_stop_message(stopped, None) is None
    assert budget_stop_message({**stopped, "SecondaryStatus": "Stopped"}, 60) is None


def test_the_operators_minimum_is_the_modules() -> None:
    from airflow_hetero.job.budget import DEFAULT_MIN_RUNTIME_SECONDS
    from airflow_hetero.operators import HeteroTrainingOperator

    assert HeteroTrainingOperator.budget_min_runtime_seconds == DEFAULT_MIN_RUNTIME_SECONDS


# --- every refusal and cap not covered above (docs/cost.md), each seen failing on a mutant of its rule ----------


def test_an_empty_max_cost_is_no_budget() -> None:
    assert check_max_cost("") is None  # a template that rendered to nothing


def test_a_cap_of_exactly_the_minimum_runtime_is_allowed() -> None:
    per_second = 3600.0  # 1 per second: 420 buys 300 s after the 120 s stop window
    assert (
        plan_budget(420.0, 0.0, per_second, 86400, min_runtime=300, stop_window=120, currency="USD").runtime_cap == 300
    )
    with pytest.raises(BudgetError, match="buys 299 s"):
        plan_budget(419.0, 0.0, per_second, 86400, min_runtime=300, stop_window=120, currency="USD")


def test_the_stop_window_given_is_the_one_paid_for() -> None:
    assert plan_budget(1.0, 0.0, 3.6, 86400, min_runtime=1, stop_window=0, currency="USD").runtime_cap == 1000
    plan = plan_budget(1.0, 0.0, 3.6, 86400, min_runtime=1, stop_window=300, currency="USD")
    assert (plan.runtime_cap, plan.stop_window) == (700, 300) and plan.worst_case == pytest.approx(1.0)


def test_a_request_without_a_max_runtime_is_capped_from_the_services_default() -> None:
    plan = plan_request_budget(
        request(max_run=None), [], priced(PRICES), max_cost=1e6, sources="s", min_runtime=1, currency="USD"
    )
    assert plan.requested_runtime == 86400 and plan.runtime_cap == 86400 and not plan.lowered


def test_an_earlier_job_that_billed_needs_a_price_too() -> None:
    earlier = {
        "TrainingJobStatus": "Stopped",
        "BillableTimeInSeconds": 60,
        "ResourceConfig": {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1},
    }
    prices = {**priced(PRICES), "ml.p5.48xlarge": (None, "not in the Price List")}
    with pytest.raises(BudgetError, match=r"no price for ml\.p5\.48xlarge: not in the Price List"):
        plan_request_budget(request(), [earlier], prices, max_cost=50.0, sources="s", min_runtime=1, currency="USD")


def test_a_spot_wait_is_never_lowered_below_the_cap() -> None:
    spot = request(max_run=None, EnableManagedSpotTraining=True)  # the service's default MaxRuntime, 86400 s
    spot["StoppingCondition"] = {"MaxWaitTimeInSeconds": 7200}  # lowered by as much would be below zero
    plan = plan_request_budget(spot, [], priced(PRICES), max_cost=10.0, sources="s", min_runtime=300, currency="USD")
    stopping = capped_request(spot, plan)["StoppingCondition"]
    assert stopping == {"MaxWaitTimeInSeconds": plan.runtime_cap, "MaxRuntimeInSeconds": plan.runtime_cap}


def test_an_on_demand_jobs_wait_is_left_as_it_is() -> None:
    job = request(max_run=86400)
    job["StoppingCondition"]["MaxWaitTimeInSeconds"] = 90000  # not spot: the service refuses it, not the budget
    plan = plan_budget(10.0, 0.0, 36.4, 86400, min_runtime=300, currency="USD")
    assert capped_request(job, plan)["StoppingCondition"]["MaxWaitTimeInSeconds"] == 90000


def test_a_recapped_request_has_one_budget_tag() -> None:
    first = capped_request(request(), plan_budget(10.0, 0.0, 36.4, 86400, min_runtime=300, currency="USD"))
    again = capped_request(first, plan_budget(5.0, 0.0, 36.4, 86400, min_runtime=300, currency="USD"))
    assert [t for t in again["Tags"] if t["Key"] == BUDGET_TAG] == [{"Key": BUDGET_TAG, "Value": "374"}]


def test_a_budget_tag_that_is_not_a_number_is_no_cap() -> None:
    assert budget_cap_in_tags([{"Key": BUDGET_TAG, "Value": "soon"}]) is None
    assert budget_cap_in_tags([{"Key": "other", "Value": "60"}, {"Key": BUDGET_TAG, "Value": "60"}]) == 60
