"""The operator's budget (max_cost) against the offline endpoint and its stand-in prices (issue 26).

Each test runs the operator's real code (sync or deferred, the trigger run in the test) and reads the jobs
and their descriptions from the endpoint afterwards. The endpoint's Price List stand-in prices the clusters
(:func:`airflow_hetero.local.api.pricing.stand_in_price`), so the expected caps are computed from it and from
the jobs' own BillableTimeInSeconds, never written down.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import pytest
from support.example_jobs import Group, example_job
from support.local_jobkit import BUCKET
from support.task_logs import record_logs

from airflow_hetero._compat import AirflowFailException, TaskDeferred
from airflow_hetero.amounts import format_amount
from airflow_hetero.job.budget import BUDGET_TAG
from airflow_hetero.job.outcome import TrainingJobBudgetError, TrainingJobFailedError
from airflow_hetero.local import LocalEndpoint
from airflow_hetero.local.api.pricing import stand_in_price
from airflow_hetero.operators import HeteroTrainingOperator

pytestmark = pytest.mark.slow

ENDPOINT_RUN = {"stop_grace": 1.0, "metrics_interval": 0.5}
CONN_ID = "hetero_budget_endpoint"
DATA, TRAIN, FALLBACK = "ml.c5.xlarge", "ml.c5.2xlarge", "ml.m5.xlarge"
SCRIPT = """\
import os, time
mode = os.environ.get("SM_HP_MODE", "ok").strip('"')
if mode == "sleep":
    time.sleep(600)
if mode == "fail" and os.environ["SM_CURRENT_INSTANCE_GROUP"] == "dnn_group":
    time.sleep(2)
    raise SystemExit("loss became NaN")
print("trained", flush=True)
"""


class ShortBudgetOperator(HeteroTrainingOperator):
    """Short runs for the tests: a 5 s minimum run and a 10 s stop window (the endpoint stops a host in 1 s)."""

    budget_min_runtime_seconds = 5
    budget_stop_window_seconds = 10


def rate(*types: str) -> float:
    """The stand-in cluster's price per hour, one instance of each type."""
    return sum(stand_in_price(t) for t in types)


def budget_for(cap: int, per_hour: float, window: int = 10) -> float:
    """A max_cost whose runtime cap is ``cap`` seconds (the middle of that second, against rounding)."""
    return per_hour * (cap + 0.5 + window) / 3600


@pytest.fixture
def conn(endpoint: LocalEndpoint, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalEndpoint]:
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", endpoint.airflow_connection_json())
    yield endpoint
    endpoint.set_capacity(dict.fromkeys((TRAIN, FALLBACK)))


@pytest.fixture(scope="module")
def code_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("code")
    (path / "train.py").write_text(SCRIPT)
    return path


def definition(code_dir: Path, mode: str, base: str, **dnn: Any) -> dict[str, Any]:
    return example_job(
        base,
        framework_version="2.1",
        source_dir=str(code_dir),
        output_path=f"s3://{BUCKET}/output",
        groups=[Group("data_group", DATA), Group("dnn_group", TRAIN, 1, dnn)],
        hyperparameters={"mode": mode},
        max_run=600,
    )


def operator(code_dir: Path, mode: str = "ok", base: str = "budget", **kwargs: Any) -> HeteroTrainingOperator:
    dnn = kwargs.pop("dnn", {})
    kwargs.setdefault("deferrable", False)
    kwargs.setdefault("print_log", False)
    return ShortBudgetOperator(
        task_id="train",
        job=definition(code_dir, mode, base, **dnn),
        aws_conn_id=CONN_ID,
        check_interval=0.2,
        **kwargs,
    )


def context(run_id: str) -> dict[str, Any]:
    return {"ti": MagicMock(dag_id="budget", task_id="train", run_id=run_id, map_index=-1), "params": {}}


def jobs_named(sm: Any, base: str) -> list[dict[str, Any]]:
    """Every job whose name holds ``base``, oldest first, described."""
    summaries = sm.list_training_jobs(NameContains=base, MaxResults=100)["TrainingJobSummaries"]
    described = [sm.describe_training_job(TrainingJobName=s["TrainingJobName"]) for s in summaries]
    return sorted(described, key=lambda d: d["CreationTime"])


def billed(describe: dict[str, Any]) -> float:
    """BillableTimeInSeconds x counts x stand-in prices, from the job's own description."""
    groups = describe["ResourceConfig"]["InstanceGroups"]
    per_hour = sum(g["InstanceCount"] * stand_in_price(g["InstanceType"]) for g in groups)
    return float(describe.get("BillableTimeInSeconds") or 0) * per_hour / 3600


def run_deferred(first: HeteroTrainingOperator, resumed: Any, ctx: dict[str, Any]) -> dict[str, Any]:
    """``first.execute``, then the trigger and ``resumed().execute_complete`` (a new worker each time) until
    the task ends."""
    with pytest.raises(TaskDeferred) as info:
        first.execute(ctx)
    deferred = info.value
    for _ in range(3):
        event = asyncio.run(asyncio.wait_for(anext(deferred.trigger.run()), 120))
        try:
            result: dict[str, Any] = resumed().execute_complete(ctx, event.payload, **(deferred.kwargs or {}))
            return result
        except TaskDeferred as again:
            deferred = again
    raise AssertionError("deferred more than 3 times")


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
def test_a_budget_below_the_minimum_refuses_before_any_job(
    conn: LocalEndpoint, code_dir: Path, sm: Any, deferrable: bool
) -> None:
    base = f"tiny-{int(deferrable)}"
    per_hour = rate(DATA, TRAIN)
    op = operator(code_dir, base=base, deferrable=deferrable, max_cost=budget_for(2, per_hour))
    with pytest.raises(AirflowFailException) as info:
        op.execute(context(base))
    message = str(info.value)
    assert "budget:" in message and "minimum useful run of 5 s" in message and "nothing was submitted" in message
    assert sm.list_training_jobs(NameContains=base)["TrainingJobSummaries"] == []


def test_an_unknown_price_refuses_naming_the_type_and_the_sources(conn: LocalEndpoint, code_dir: Path, sm: Any) -> None:
    op = operator(code_dir, base="noprice", max_cost=100.0, prices={DATA: 0.3}, currency="EUR", use_pricing_api=False)
    with pytest.raises(AirflowFailException) as info:
        op.execute(context("noprice"))
    message = str(info.value)
    assert f"no price for {TRAIN}" in message and DATA not in message.partition("sources tried")[0]
    assert f"sources tried: prices= ({DATA})" in message and "use_pricing_api=False" in message
    assert "never guesses" in message
    assert sm.list_training_jobs(NameContains="noprice")["TrainingJobSummaries"] == []


def test_an_unknown_type_of_the_stand_in_refuses_too(conn: LocalEndpoint, code_dir: Path, sm: Any) -> None:
    """With the Price List asked (the endpoint's stand-in), a currency it does not price refuses the same."""
    op = operator(code_dir, base="eur", max_cost=100.0, currency="EUR")
    with pytest.raises(AirflowFailException, match=rf"no price for {DATA}: prices= has no EUR price"):
        op.execute(context("eur"))
    assert sm.list_training_jobs(NameContains="eur")["TrainingJobSummaries"] == []


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
def test_a_long_job_is_stopped_by_the_service_at_the_cap(
    conn: LocalEndpoint, code_dir: Path, sm: Any, deferrable: bool
) -> None:
    base = f"capped-{int(deferrable)}"
    per_hour = rate(DATA, TRAIN)
    max_cost = budget_for(8, per_hour)
    expected_cap = math.floor(max_cost * 3600 / per_hour) - 10
    first = operator(code_dir, "sleep", base, deferrable=deferrable, max_cost=max_cost)
    logged = record_logs(first)
    ctx = context(base)

    with pytest.raises(TrainingJobBudgetError) as info:
        if deferrable:
            run_deferred(first, lambda: operator(code_dir, "sleep", base, deferrable=True, max_cost=max_cost), ctx)
        else:
            first.execute(ctx)
    assert "stopped by its budget" in str(info.value) and f"runtime cap of {expected_cap} s" in str(info.value)
    [job] = jobs_named(sm, base)
    assert job["SecondaryStatus"] == "MaxRuntimeExceeded"
    assert job["StoppingCondition"]["MaxRuntimeInSeconds"] == expected_cap
    tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=job["TrainingJobArn"])["Tags"]}
    assert tags[BUDGET_TAG] == str(expected_cap)
    assert 0 < billed(job) <= max_cost
    retry = operator(code_dir, "sleep", base, max_cost=max_cost)  # the task's retry: the budget is spent
    with pytest.raises(AirflowFailException, match=r"budget: .* below the minimum useful run of 5 s"):
        retry.execute(ctx)
    assert len(jobs_named(sm, base)) == 1  # nothing more submitted
    line = next(line for line in logged.lines if line.startswith("Budget:"))
    assert f"cluster {format_amount(per_hour)} USD/hour" in line
    assert f"MaxRuntimeInSeconds {expected_cap} (lowered from 600)" in line
    assert f"worst case {format_amount(per_hour * (expected_cap + 10) / 3600)} USD" in line


def test_a_retry_spends_what_the_first_try_left(conn: LocalEndpoint, code_dir: Path, sm: Any) -> None:
    per_hour = rate(DATA, TRAIN)
    max_cost = budget_for(60, per_hour)
    with pytest.raises(TrainingJobFailedError, match="NaN"):
        operator(code_dir, "fail", "retry", max_cost=max_cost).execute(context("retry"))
    [failed] = jobs_named(sm, "retry")
    spent = billed(failed)
    assert spent > 0
    retry = operator(code_dir, "ok", "retry", max_cost=max_cost)
    logged = record_logs(retry)
    result = retry.execute(context("retry"))  # the same task instance: the second name of its walk
    assert result["status"] == "Completed"
    jobs = jobs_named(sm, "retry")
    assert [j["TrainingJobName"] for j in jobs] == [failed["TrainingJobName"], result["training_job_name"]]
    expected_cap = math.floor((max_cost - spent) * 3600 / per_hour) - 10
    assert expected_cap < 60  # what the first try billed is gone
    assert jobs[1]["StoppingCondition"]["MaxRuntimeInSeconds"] == expected_cap
    assert f"spent by earlier attempts {format_amount(spent)}" in logged.text()


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
def test_a_budget_spans_a_capacity_fallback(conn: LocalEndpoint, code_dir: Path, sm: Any, deferrable: bool) -> None:
    """The fallback cluster is priced as it is sent (its own type's price), after the failed attempt's cost."""
    conn.set_capacity({TRAIN: 0})
    base = f"fallback-{int(deferrable)}"
    max_cost = budget_for(120, rate(DATA, TRAIN))

    def make() -> HeteroTrainingOperator:
        return operator(
            code_dir, "ok", base, deferrable=deferrable, max_cost=max_cost, dnn={"fallback_instance_types": [FALLBACK]}
        )

    op = make()
    logged = record_logs(op)
    if deferrable:
        resumed: list[HeteroTrainingOperator] = []

        def resume() -> HeteroTrainingOperator:
            resumed.append(make())
            record_logs(resumed[-1]).records = logged.records  # one task log across the workers
            return resumed[-1]

        result = run_deferred(op, resume, context(base))
    else:
        result = op.execute(context(base))
    assert result["status"] == "Completed" and len(result["capacity_attempts"]) == 1
    first, second = jobs_named(sm, base)
    assert first["FailureReason"].startswith("CapacityError")
    spent = billed(first)
    per_hour = rate(DATA, FALLBACK)
    expected = min(600, math.floor((max_cost - spent) * 3600 / per_hour) - 10)
    assert second["StoppingCondition"]["MaxRuntimeInSeconds"] == expected
    budget_lines = [line for line in logged.lines if line.startswith("Budget:")]
    assert len(budget_lines) == 2  # one per cluster sent
    assert f"cluster {format_amount(per_hour)} USD/hour" in budget_lines[1]
    assert f"spent by earlier attempts {format_amount(spent)}" in budget_lines[1]


def test_max_cost_is_templated(conn: LocalEndpoint, code_dir: Path, sm: Any) -> None:
    from airflow.providers.common.compat.sdk import DAG

    tiny = budget_for(1, rate(DATA, TRAIN))
    with DAG("budget", schedule=None):
        op = operator(code_dir, base="templated", max_cost="{{ params.budget }}")
    ctx = context("templated")
    ctx["params"] = {"budget": tiny}
    op.render_template_fields(ctx)
    assert float(op.max_cost) == pytest.approx(tiny)  # type: ignore[arg-type]
    with pytest.raises(AirflowFailException, match=f"max_cost {tiny:g} USD"):
        op.execute(ctx)
    assert sm.list_training_jobs(NameContains="templated")["TrainingJobSummaries"] == []


def test_a_bad_rendered_max_cost_fails_without_a_job(conn: LocalEndpoint, code_dir: Path, sm: Any) -> None:
    op = operator(code_dir, base="badcost", max_cost="ten dollars")
    with pytest.raises(AirflowFailException, match="max_cost must be a positive number"):
        op.execute(context("badcost"))
    assert sm.list_training_jobs(NameContains="badcost")["TrainingJobSummaries"] == []


def test_the_cost_command_prices_with_the_endpoints_stand_in(
    conn: LocalEndpoint,
    code_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import yaml

    from airflow_hetero.cli import main

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(definition(code_dir, "ok", "cli")))
    per_hour = rate(DATA, TRAIN)
    max_cost = per_hour * (400.5 + 120) / 3600  # a 400 s cap with the CLI's 120 s stop window
    assert main(["cost", str(path), "--endpoint-url", conn.url, "--max-cost", repr(max_cost)]) == 0
    out = capsys.readouterr().out
    assert (
        f"1 x {TRAIN}: {format_amount(stand_in_price(TRAIN))}/hour, {format_amount(stand_in_price(TRAIN))} each ("
        in out
    )
    assert "(override)" not in out  # the Price List's stand-in (or its disk cache, when a test asked first)
    assert f"cluster: {format_amount(per_hour)} USD/hour" in out
    assert f"worst case: {format_amount(per_hour * (600 + 120) / 3600)} USD" in out
    assert "MaxRuntimeInSeconds 400 (lowered from 600)" in out
