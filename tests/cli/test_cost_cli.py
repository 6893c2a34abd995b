"""``airflow-hetero cost`` and ``validate/render --max-cost``: the budget the operator would set, said offline."""

from __future__ import annotations

import json
import math
import socket
from pathlib import Path
from typing import Any

import pytest

from airflow_hetero.amounts import format_amount
from airflow_hetero.cli import main
from airflow_hetero.job.budget import BUDGET_TAG
from airflow_hetero.sagemaker_facts import STOP_SIGNAL_WINDOW_SECONDS

EXAMPLE = Path(__file__).resolve().parents[2] / "airflow_hetero" / "example_dags" / "hetero_retraining" / "job.yaml"
#: The example's cluster: data_group 2 x ml.c5.xlarge, train_group 1 x ml.g5.xlarge.
PRICES = {"ml.c5.xlarge": 0.204, "ml.g5.xlarge": 1.408}
PRICE_ARGS = [f"--price={name}={value}" for name, value in PRICES.items()]
RATE = 2 * PRICES["ml.c5.xlarge"] + PRICES["ml.g5.xlarge"]


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """With every price given, nothing is asked of the network."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the CLI tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def render(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict[str, Any] | None, str]:
    code = main(["render", str(EXAMPLE), *extra])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if code == 0 else None, captured.err


def test_cost_prints_each_group_and_the_worst_case(capsys: pytest.CaptureFixture[str]) -> None:
    _, request, _ = render(capsys)
    assert request is not None
    runtime = request["StoppingCondition"]["MaxRuntimeInSeconds"]
    assert main(["cost", str(EXAMPLE), *PRICE_ARGS]) == 0
    out = capsys.readouterr().out
    assert (
        f"data_group   2 x ml.c5.xlarge: {format_amount(2 * PRICES['ml.c5.xlarge'])}/hour, 0.204 each (override)" in out
    )
    assert f"train_group  1 x ml.g5.xlarge: {format_amount(PRICES['ml.g5.xlarge'])}/hour" in out
    assert f"cluster: {format_amount(RATE)} USD/hour" in out
    worst = RATE * (runtime + STOP_SIGNAL_WINDOW_SECONDS) / 3600
    assert f"worst case: {format_amount(worst)} USD (MaxRuntimeInSeconds {runtime} + 120 s stop window)" in out
    assert "Budget:" not in out


def test_cost_with_a_budget_prints_the_cap(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", str(EXAMPLE), *PRICE_ARGS, "--max-cost", "1"]) == 0
    out = capsys.readouterr().out
    cap = math.floor(3600 / RATE) - STOP_SIGNAL_WINDOW_SECONDS
    assert f"MaxRuntimeInSeconds {cap} (lowered from" in out


def test_cost_without_a_price_says_so_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", str(EXAMPLE), "--price=ml.c5.xlarge=0.2", "--no-pricing-api"]) == 2
    captured = capsys.readouterr()
    assert "1 x ml.g5.xlarge: no price: prices= has none for it and the Pricing API was not asked" in captured.out
    assert "a budget never guesses" in captured.err


def test_render_with_a_budget_sends_the_cap(capsys: pytest.CaptureFixture[str]) -> None:
    code, request, err = render(capsys, *PRICE_ARGS, "--max-cost", "1.5")
    assert code == 0 and request is not None
    cap = math.floor(1.5 * 3600 / RATE) - STOP_SIGNAL_WINDOW_SECONDS
    assert request["StoppingCondition"]["MaxRuntimeInSeconds"] == cap
    assert {"Key": BUDGET_TAG, "Value": str(cap)} in request["Tags"]
    assert f"cluster {format_amount(RATE)} USD/hour" in err and f"MaxRuntimeInSeconds {cap}" in err


def test_render_refuses_a_budget_below_the_minimum(capsys: pytest.CaptureFixture[str]) -> None:
    code, request, err = render(capsys, *PRICE_ARGS, "--max-cost", "0.1")
    assert code == 2 and request is None
    assert "--max-cost: budget refuses: max_cost 0.1 USD" in err and "minimum useful run of 300 s" in err


def test_a_lower_minimum_runtime_lets_a_small_budget_through(capsys: pytest.CaptureFixture[str]) -> None:
    code, request, _ = render(capsys, *PRICE_ARGS, "--max-cost", "0.1", "--min-runtime", "60")
    assert code == 0 and request is not None
    assert request["StoppingCondition"]["MaxRuntimeInSeconds"] == math.floor(0.1 * 3600 / RATE) - 120


def test_validate_says_the_budget(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(EXAMPLE), *PRICE_ARGS, "--max-cost", "1.5"]) == 0
    out = capsys.readouterr().out
    assert "valid (heterogeneous cluster" in out and f"Budget: cluster {format_amount(RATE)} USD/hour" in out


def test_validate_json_with_a_refused_budget(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["validate", str(EXAMPLE), "--json", "--price=ml.c5.xlarge=0.2", "--no-pricing-api", "--max-cost", "9"]
    assert main(args) == 2
    answer = json.loads(capsys.readouterr().out)
    assert answer["valid"] is False
    [problem] = answer["problems"]
    assert problem["loc"] == "--max-cost"
    assert "no price for ml.g5.xlarge" in problem["msg"] and "--no-pricing-api" in problem["msg"]


def test_validate_json_with_a_budget(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(EXAMPLE), "--json", *PRICE_ARGS, "--max-cost", "1.5"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["budget"]["runtime_cap"] == math.floor(1.5 * 3600 / RATE) - 120
    assert answer["budget"]["worst_case"] <= 1.5


def test_a_bad_price_names_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", str(EXAMPLE), "--price=ml.c5.xlarge=-1"]) == 2
    assert "--price: prices: ml.c5.xlarge must be a price per instance-hour >= 0" in capsys.readouterr().err


def test_a_budget_above_the_worst_case_keeps_the_jobs_runtime(capsys: pytest.CaptureFixture[str]) -> None:
    code, request, err = render(capsys, *PRICE_ARGS, "--max-cost", "100")
    assert code == 0 and request is not None
    assert request["StoppingCondition"]["MaxRuntimeInSeconds"] == 3600  # the example's max_run, not raised
    assert "MaxRuntimeInSeconds 3600 (the job's own)" in err
