"""One rounding and one text form of money (airflow_hetero.amounts): a non-zero amount never reads 0 or -0, in
the cost table, the verdict's what-if, the Instance groups view, the budget's line and the right-sizing line."""

from __future__ import annotations

import re
from typing import Any

import pytest

from airflow_hetero.amounts import format_amount, round_amount
from airflow_hetero.logs.cost import job_cost
from airflow_hetero.logs.table import format_table
from airflow_hetero.logs.verdict import format_verdict, judge_groups
from airflow_hetero.plugins.page import render_page
from airflow_hetero.pricing.price_list import Price

#: The offline endpoint's stand-in price of the demo's types (USD per instance-hour).
DEMO_PRICE = 0.05


@pytest.mark.parametrize(
    ("value", "text", "signed"),
    [
        (None, "unknown", "unknown"),
        (0, "0", "0"),
        (0.0, "0", "0"),
        (1.224, "1.224", "+1.224"),
        (237.5939, "237.5939", "+237.5939"),
        (1234.5678, "1234.5678", "+1234.5678"),
        (0.0001, "0.0001", "+0.0001"),
        (0.000083, "0.000083", "+0.000083"),
        (-0.000021, "-0.000021", "-0.000021"),
        (-3.0833, "-3.0833", "-3.0833"),
        (10, "10", "+10"),
        (-0.0, "-< 0.0001", "-< 0.0001"),  # an older release's rounding of a small negative change
    ],
)
def test_format_amount(value: float | None, text: str, signed: str) -> None:
    assert format_amount(value) == text
    assert format_amount(value, signed=True) == signed


def test_a_stored_zero_known_to_be_non_zero_reads_below_the_stored_precision() -> None:
    assert format_amount(0.0, known_nonzero=True) == "< 0.0001"
    assert format_amount(0.0, signed=True, known_nonzero=True) == "+< 0.0001"
    assert format_amount(0.5, known_nonzero=True) == "0.5"


def test_round_amount_keeps_a_tiny_amount_and_never_stores_minus_zero() -> None:
    assert round_amount(1.23456) == 1.2346  # as before: 4 decimals
    assert round_amount(0.00001389) == 0.000014  # was 0.0
    assert round_amount(-0.00002083) == -0.000021  # was -0.0
    assert round_amount(0.00034567) == 0.00035  # 4 decimals kept one digit: 0.0003
    assert round_amount(0.0012345) == 0.0012 and round_amount(0.00099999) == 0.001
    assert str(round_amount(-0.0)) == "0.0" and str(round_amount(-1e-30)) == "-1e-30"
    assert round_amount(0.0) == 0.0


def tiny_job() -> tuple[dict[str, Any], dict[str, Price]]:
    """The demo's tiny job: 2 data instances and 1 training instance for 1 s each at the stand-in price; the
    data group the bottleneck (its CPUs 96 % busy, the GPU group waits at 38 %)."""
    groups = {
        "data_group": {
            "instance_type": "ml.c5.xlarge",
            "instance_count": 2,
            "instance_seconds": 2.0,
            "devices": {"cpus": 4, "gpus": 0},
            "utilization": {"cpu": {"avg": 96.0, "max": 99.0}, "memory": None, "gpu": None, "gpu_memory": None},
            "series": None,
        },
        "train_group": {
            "instance_type": "ml.g5.xlarge",
            "instance_count": 1,
            "instance_seconds": 1.0,
            "devices": {"cpus": 4, "gpus": 1},
            "utilization": {"cpu": None, "memory": None, "gpu": {"avg": 38.0, "max": 40.0}, "gpu_memory": None},
            "series": None,
        },
    }
    prices = {t: Price(t, DEMO_PRICE, "USD", "pricing_api") for t in ("ml.c5.xlarge", "ml.g5.xlarge")}
    return groups, prices


#: An amount printed as zero: ``0`` or ``-0`` (or ``0.0``) standing alone.
ZERO = re.compile(r"(?<![\d.<])[-+]?0(\.0+)?(?![\d.])")


def test_the_demos_tiny_job_reads_non_zero_in_the_table_the_verdict_and_the_view() -> None:
    groups, prices = tiny_job()
    verdict = judge_groups(groups, partial=False, prices=prices)  # type: ignore[arg-type]
    cost = job_cost(groups, verdict, prices, currency="USD", describe={}, partial=False)  # type: ignore[arg-type]
    assert cost["groups"]["data_group"]["cost"] == 0.000028  # 2 s x 0.05 / 3600 (stored as 0.0 before)
    effect = verdict["suggestion"]["effect"]  # type: ignore[index]
    assert effect["per_run"] is not None and effect["per_run"] < 0
    what_if = format_verdict(verdict)
    assert " USD per run" in what_if and " -0 USD per run" not in what_if
    assert re.search(r"\+0\.1 USD/h, -0\.0000\d+ USD per run", what_if), what_if
    summary = {"training_job_name": "demo", "status": "Completed", "groups": groups, "cost": cost, "verdict": verdict}
    table = format_table(summary)
    (data_row,) = [line for line in table.splitlines() if line.startswith("data_group   2")]
    assert "0.000028" in data_row and not ZERO.search(data_row.split("0.05", 1)[1]), data_row
    html = render_page(summary, where="DAG d")
    assert "<td>0.000028</td>" in html and "<td>0</td>" not in html


def test_an_older_summary_whose_amounts_were_rounded_away() -> None:
    """Stored as 0.0 and -0.0 by the old rounding: the group's cost reads < 0.0001 (it has instance time at a
    price), the what-if -< 0.0001, never 0 or -0."""
    groups, prices = tiny_job()
    verdict = judge_groups(groups, partial=False, prices=prices)  # type: ignore[arg-type]
    cost = job_cost(groups, verdict, prices, currency="USD", describe={}, partial=False)  # type: ignore[arg-type]
    for g in cost["groups"].values():
        g["cost"] = 0.0
    verdict["suggestion"]["effect"]["per_run"] = -0.0  # type: ignore[index]
    summary = {"training_job_name": "old", "status": "Completed", "groups": groups, "cost": cost, "verdict": verdict}
    table = format_table(summary)
    assert "< 0.0001" in next(line for line in table.splitlines() if line.startswith("data_group   2"))
    assert "-< 0.0001 USD per run" in format_verdict(verdict)
    assert "&lt; 0.0001" in render_page(summary, where="DAG d")


def test_the_budget_and_the_rightsizing_line_print_amounts_the_same_way() -> None:
    from airflow_hetero.job.budget import plan_budget
    from airflow_hetero.job.rightsizing_decision import GroupDecision

    plan = plan_budget(1.5, 0.0000139, DEMO_PRICE, 3600, min_runtime=60, currency="USD")
    line = plan.describe("USD")
    assert "cluster 0.05 USD/hour" in line and "spent by earlier attempts 0.0000139, left 1.5" in line
    decision = GroupDecision("data_group", "kept", 2, 2, "why", figures={"cost_per_run": 0.0000139, "run_seconds": 3})
    assert decision.line().endswith("[cost_per_run=0.0000139, run_seconds=3]")
