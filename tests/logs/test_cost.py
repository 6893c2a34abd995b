"""The cost core: each group's cost and waiting cost, the total, spot jobs, unknown prices, and the
verdict's suggestions in money under its documented model."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_hetero.amounts import format_amount
from airflow_hetero.logs.cost import bottleneck_speedup, job_cost
from airflow_hetero.logs.table import format_table
from airflow_hetero.logs.verdict import format_verdict
from airflow_hetero.logs.verdict import judge_groups as judge_per_device
from airflow_hetero.pricing.price_list import Price


def judge_groups(groups: dict[str, Any], **kwargs: Any) -> Any:
    """The verdict of groups holding SageMaker's summed figures, converted per device as build_summary does
    (in place: the cost reads the same groups)."""
    from airflow_hetero.logs.capacity import per_device_series, per_device_utilization
    from airflow_hetero.sagemaker_facts import capacity

    for g in groups.values():
        if "devices" not in g:
            cap = capacity(g.get("instance_type"))
            g["devices"] = {"cpus": cap.cpus, "gpus": cap.gpus}
            g["utilization"] = per_device_utilization(g.get("utilization"), cap)
            g["series"] = per_device_series(g.get("series"), cap)
    return judge_per_device(groups, **kwargs)


PRICES = {
    "ml.c5.18xlarge": Price("ml.c5.18xlarge", 3.672, "USD", "pricing_api", "$3.672 per hour"),
    "ml.p4d.24xlarge": Price("ml.p4d.24xlarge", 37.688, "USD", "override"),
}


def group(instance_type: str, count: int, seconds: float, **util: float) -> dict[str, Any]:
    return {
        "instance_type": instance_type,
        "instance_count": count,
        "instance_seconds": seconds * count,
        "utilization": {
            k: ({"avg": util[k], "max": util[k]} if k in util else None) for k in ("cpu", "memory", "gpu", "gpu_memory")
        },
        "series": None,
    }


def data_bound() -> dict[str, Any]:
    # 2 x c5.18xlarge at 96 % CPU, 1 x p4d at 38 % GPU, 600 billable seconds
    return {
        "data_group": group("ml.c5.18xlarge", 2, 600, cpu=96 * 72),
        "train_group": group("ml.p4d.24xlarge", 1, 600, gpu=38 * 8),
    }


def test_cost_per_group_total_and_waiting() -> None:
    groups = data_bound()
    groups["train_group"]["series"] = {"points": 4, "gpu": {"avg": [8, 8, 8, 800], "max": [8, 8, 8, 800]}}
    verdict = judge_groups(groups, partial=False, prices=PRICES)
    cost = job_cost(groups, verdict, PRICES, currency="USD", describe={}, partial=False)
    data, train = cost["groups"]["data_group"], cost["groups"]["train_group"]
    assert data["cost"] == round(1200 * 3.672 / 3600, 4) == 1.224
    assert train["cost"] == round(600 * 37.688 / 3600, 4) == 6.2813
    assert train["waiting_instance_seconds"] == 450.0  # 3 of 4 buckets under 50 % of 8 GPUs
    assert train["waiting_cost"] == round(450 * 37.688 / 3600, 4)
    assert cost["total"] == round(1.224 + 6.2813, 4) and cost["estimate"] is False and cost["spot"] is None
    assert data["waiting_cost"] is None and cost["waiting"] is None  # data_group has no series: unknown
    assert cost["prices"]["ml.p4d.24xlarge"] == {"per_hour": 37.688, "currency": "USD", "source": "override"}
    json.dumps(cost)


def test_an_unknown_price_leaves_the_total_unknown_and_says_why() -> None:
    groups = data_bound()
    prices = {**PRICES, "ml.p4d.24xlarge": Price("ml.p4d.24xlarge", None, "USD", reason="the Pricing API refused")}
    cost = job_cost(groups, None, prices, currency="USD", describe={}, partial=True)
    assert cost["groups"]["train_group"]["cost"] is None
    assert cost["groups"]["train_group"]["reason"] == "the Pricing API refused"
    assert cost["groups"]["data_group"]["cost"] == 1.224  # the rest still works
    assert cost["total"] is None and cost["waiting"] is None
    assert cost["notes"] == [
        "total unknown: no cost for train_group (see its reason)",
        "the job is still running: the cost so far",
    ]
    assert cost["estimate"] is True
    missing = job_cost({"g": group("custom", 1, 10)}, None, {}, currency="EUR", describe={}, partial=False)
    assert missing["groups"]["g"]["reason"] == "the instance type is not known"


def test_spot_jobs_use_the_jobs_own_ratio_and_are_an_estimate() -> None:
    describe = {"EnableManagedSpotTraining": True, "BillableTimeInSeconds": 150, "TrainingTimeInSeconds": 600}
    groups = {"train_group": group("ml.p4d.24xlarge", 2, 150)}  # instance_seconds = 2 x billable
    cost = job_cost(groups, None, PRICES, currency="USD", describe=describe, partial=False)
    assert cost["spot"] == {"billable_seconds": 150, "training_seconds": 600, "ratio": 0.25}
    # on-demand price x count x training time x (billable / training)
    assert cost["groups"]["train_group"]["cost"] == round(37.688 * 2 * 600 * 0.25 / 3600, 4)
    assert cost["estimate"] is True and "billable/training = 0.25" in cost["notes"][0]


def test_each_group_shows_its_spot_saving_in_cost_table_and_verdict() -> None:
    """A spot job's groups: instance time not billed = count x (training - billable); its money at each group's
    price, in the cost, the cost table's spot saving column and the verdict's group lines."""
    from airflow_hetero.logs.per_group import spot_saved_instance_seconds

    describe = {"EnableManagedSpotTraining": True, "BillableTimeInSeconds": 180, "TrainingTimeInSeconds": 600}
    groups = data_bound()
    for g in groups.values():
        g["instance_seconds"] = 180.0 * g["instance_count"]
        g["spot_saved_instance_seconds"] = spot_saved_instance_seconds(g["instance_count"], describe)
    assert groups["data_group"]["spot_saved_instance_seconds"] == 2 * 420.0
    verdict = judge_groups(groups, partial=False, prices=PRICES)
    cost = job_cost(groups, verdict, PRICES, currency="USD", describe=describe, partial=False)
    data, train = cost["groups"]["data_group"], cost["groups"]["train_group"]
    assert data["spot_saving"] == round(840 * 3.672 / 3600, 4)
    assert train["spot_saving"] == round(420 * 37.688 / 3600, 4)
    assert cost["spot_saving"] == round(data["spot_saving"] + train["spot_saving"], 4)
    assert "billable/training = 0.3, 70% saved" in cost["notes"][0]
    table = format_table({"training_job_name": "j", "status": "Completed", "groups": {}, "cost": cost})
    header = next(line for line in table.splitlines() if "waiting cost" in line)
    assert header.rstrip().endswith("spot saving")
    total = next(line for line in table.splitlines() if line.startswith("total"))
    assert total.split()[-1] == format_amount(cost["spot_saving"])
    text = format_verdict(verdict)
    assert "data_group: CPUs 96% busy (peak 96%), 360 instance-seconds, spot saved 840" in text
    assert ", spot saved 840 instance-seconds (70%)" in text and ", spot saved 420 instance-seconds (70%)" in text


def test_an_on_demand_job_has_no_spot_saving() -> None:
    from airflow_hetero.logs.per_group import spot_saved_instance_seconds

    assert spot_saved_instance_seconds(2, {"BillableTimeInSeconds": 10, "TrainingTimeInSeconds": 10}) is None
    assert spot_saved_instance_seconds(2, {"EnableManagedSpotTraining": True, "TrainingTimeInSeconds": 10}) is None
    groups = data_bound()
    cost = job_cost(groups, judge_groups(groups, partial=False), PRICES, currency="USD", describe={}, partial=False)
    assert "spot_saving" not in cost and all("spot_saving" not in g for g in cost["groups"].values())
    table = format_table({"training_job_name": "j", "status": "Completed", "groups": {}, "cost": cost})
    assert "spot saving" not in table and "spot saved" not in format_verdict(judge_groups(groups, partial=False))


def test_the_bottleneck_suggestion_in_money_and_time() -> None:
    groups = data_bound()
    verdict = judge_groups(groups, partial=False, prices=PRICES)
    suggestion = verdict["suggestion"]
    assert suggestion is not None and suggestion["instance_count"] == 4
    effect = suggestion["effect"]
    # the waiting GPUs go from 38 % to the 75 % target: 75/38 = 1.97x faster
    speedup = bottleneck_speedup(2, 4, 38.0, 75.0)
    assert speedup == pytest.approx(75 / 38)
    assert effect["per_hour"] == round(2 * 3.672, 4)
    before = (2 * 3.672 + 37.688) * 600 / 3600
    after = (4 * 3.672 + 37.688) * (600 / speedup) / 3600
    assert effect["per_run"] == round(after - before, 4) < 0  # more data instances, a cheaper run
    assert effect["run_seconds"] == 600.0 and effect["run_seconds_after"] == round(600 / speedup, 1)
    assert effect["assumption"] == (
        "if train_group's GPUs go from 38% to 75% busy and the job's work stays the same: the run 49% shorter"
    )
    text = format_verdict(verdict)
    shown = "  if data_group has 4 instead of 2 instances: +7.344 USD/h, -3.0825 USD per run; run 600 s -> 304 s; if "
    assert shown in text
    assert bottleneck_speedup(2, 3, 38.0, 75.0) == pytest.approx(1.5)  # capped by the count, not the target
    assert bottleneck_speedup(0, 3, 38.0, 75.0) == 1.0


def test_an_over_provisioned_group_in_money_and_unknown_prices() -> None:
    groups = {
        "data_group": group("ml.c5.18xlarge", 3, 600, cpu=20 * 72),
        "train_group": group("ml.p4d.24xlarge", 1, 600, gpu=95 * 8),
    }
    verdict = judge_groups(groups, partial=False, prices=PRICES)
    effect = verdict["groups"]["data_group"]["effect"]
    assert effect["suggested_count"] == 1 and effect["per_hour"] == round(-2 * 3.672, 4)
    assert effect["per_run"] == round(-2 * 3.672 * 600 / 3600, 4) and effect["run_seconds_after"] == 600.0
    assert "not the bottleneck, so the run's length stays" in effect["assumption"]
    unpriced = judge_groups(groups, partial=False, prices={})
    lost = unpriced["groups"]["data_group"]["effect"]
    assert lost["per_hour"] is None and lost["reason"] == "no price for ml.c5.18xlarge: unknown instance type"
    without = judge_groups(groups, partial=False)
    assert "effect" not in without["groups"]["data_group"]  # no prices given: no effect


def test_the_table_shows_the_cost_within_100_columns() -> None:
    groups = data_bound()
    verdict = judge_groups(groups, partial=False, prices=PRICES)
    summary = {
        "training_job_name": "j",
        "status": "Completed",
        "groups": groups,
        "verdict": verdict,
        "cost": job_cost(groups, verdict, PRICES, currency="USD", describe={}, partial=False),
    }
    lines = format_table(summary).splitlines()  # type: ignore[arg-type]
    assert max(len(line) for line in lines) <= 100
    header = next(i for i, line in enumerate(lines) if line.startswith("group ") and "USD/h" in line)
    assert lines[header + 1].split() == ["data_group", "1200", "3.672", "1.224", "-", "-"]
    assert lines[header + 3].split() == ["total", "1800", "7.5053", "-", "-"]
    assert "price of ml.c5.18xlarge: 3.672 USD/h (Price List API): $3.672 per hour" in lines
