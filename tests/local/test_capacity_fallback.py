"""The operator's capacity fallback against the offline endpoint's capacity and quotas (issue 24).

Each test sets the endpoint's capacity / quota per type, runs the operator's real code (sync or
deferred, the trigger run in the test) and reads the jobs the endpoint holds afterwards: one job per
cluster tried, never two of one task instance running at once, none submitted twice.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import pytest
from support.example_jobs import Group, example_job
from support.local_jobkit import BUCKET
from support.task_logs import record_logs

from airflow_hetero._compat import TaskDeferred
from airflow_hetero.job.capacity_chain import ATTEMPT_TAG, CLUSTER_TAG, CapacityExhaustedError
from airflow_hetero.job.outcome import TrainingJobFailedError
from airflow_hetero.local import LocalEndpoint
from airflow_hetero.operators import CapacityFallback, HeteroTrainingOperator

pytestmark = pytest.mark.slow

ENDPOINT_RUN = {"stop_grace": 1.0, "metrics_interval": 0.5}
CONN_ID = "hetero_capacity_endpoint"
FIRST, SECOND, THIRD = "ml.p3.2xlarge", "ml.g5.2xlarge", "ml.g4dn.xlarge"
TYPES = (FIRST, SECOND, THIRD)
SCRIPT = """\
import os
mode = os.environ.get("SM_HP_MODE", "ok").strip('"')
if mode == "fail" and os.environ["SM_CURRENT_INSTANCE_GROUP"] == "dnn_group":
    raise SystemExit("loss became NaN at step 3")
print("trained", flush=True)
"""


@pytest.fixture
def conn(endpoint: LocalEndpoint, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalEndpoint]:
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", endpoint.airflow_connection_json())
    yield endpoint
    endpoint.set_capacity(dict.fromkeys(TYPES))
    endpoint.set_quota(dict.fromkeys(TYPES))


@pytest.fixture(scope="module")
def code_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("code")
    (path / "train.py").write_text(SCRIPT)
    return path


def operator(code_dir: Path, mode: str = "ok", **kwargs: Any) -> HeteroTrainingOperator:
    fallbacks = {"fallback_instance_types": [SECOND, {"instance_type": THIRD, "instance_count": 2}]}
    job = example_job(
        "capacity",
        framework_version="2.1",
        source_dir=str(code_dir),
        output_path=f"s3://{BUCKET}/output",
        groups=[Group("data_group", "ml.c5.xlarge"), Group("dnn_group", FIRST, 1, fallbacks)],
        hyperparameters={"mode": mode},
        max_run=120,
    )
    kwargs.setdefault("deferrable", False)
    kwargs.setdefault("print_log", False)
    return HeteroTrainingOperator(task_id="train", job=job, aws_conn_id=CONN_ID, check_interval=0.2, **kwargs)


def context(run_id: str) -> dict[str, Any]:
    return {"ti": MagicMock(dag_id="capacity", task_id="train", run_id=run_id, map_index=-1)}


def jobs_of(sm: Any, first_name: str) -> list[dict[str, Any]]:
    """Every job of the task instance whose first name is ``first_name``, oldest first, described."""
    summaries = sm.list_training_jobs(NameContains=first_name, MaxResults=100)["TrainingJobSummaries"]
    described = [sm.describe_training_job(TrainingJobName=s["TrainingJobName"]) for s in summaries]
    return sorted(described, key=lambda d: d["CreationTime"])


def dnn_type(describe: dict[str, Any]) -> tuple[str, int]:
    group = next(g for g in describe["ResourceConfig"]["InstanceGroups"] if g["InstanceGroupName"] == "dnn_group")
    return group["InstanceType"], group["InstanceCount"]


def assert_one_at_a_time(jobs: list[dict[str, Any]]) -> None:
    """Each job was created after the one before it had ended."""
    for before, after in itertools.pairwise(jobs):
        assert before["TrainingJobStatus"] == "Failed"
        assert after["CreationTime"] >= before["LastModifiedTime"]


def test_second_candidate_runs_after_a_capacity_error(conn: LocalEndpoint, code_dir: Path, sm: Any) -> None:
    conn.set_capacity({FIRST: 0})
    op = operator(code_dir)
    logged = record_logs(op)
    ctx = context("second-1")
    result = op.execute(ctx)
    assert result["status"] == "Completed"
    assert {"name": "dnn_group", "type": SECOND, "count": 1} in result["instance_groups"]
    [attempt] = result["capacity_attempts"]
    assert attempt["reason"].startswith("CapacityError")
    assert {"name": "dnn_group", "type": FIRST, "count": 1} in attempt["instance_groups"]
    jobs = jobs_of(sm, attempt["job_name"])
    assert [j["TrainingJobName"] for j in jobs] == [attempt["job_name"], result["training_job_name"]]
    assert [dnn_type(j) for j in jobs] == [(FIRST, 1), (SECOND, 1)]
    assert_one_at_a_time(jobs)
    tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=result["training_job_arn"])["Tags"]}
    assert tags[ATTEMPT_TAG] == "2"
    assert tags[CLUSTER_TAG] == f"data_group=1 x ml.c5.xlarge / dnn_group=1 x {SECOND}"
    assert f"dnn_group {FIRST} x1 -> {SECOND} x1" in "\n".join(logged.lines)
    pushed = [c.kwargs["value"] for c in ctx["ti"].xcom_push.call_args_list if c.kwargs["key"] == "training_job_name"]
    assert pushed == [attempt["job_name"], result["training_job_name"]]
    attempts = [c.kwargs["value"] for c in ctx["ti"].xcom_push.call_args_list if c.kwargs["key"] == "capacity_attempts"]
    assert attempts == [[], [attempt]]  # with each job, before its wait: the summary reads the last


def run_with_pushes(op: HeteroTrainingOperator, run_id: str) -> tuple[dict[str, Any], list[str]]:
    ctx = context(run_id)
    result = op.execute(ctx)
    names = [c.kwargs["value"] for c in ctx["ti"].xcom_push.call_args_list if c.kwargs["key"] == "training_job_name"]
    return result, names


def test_third_candidate_and_the_job_name_pushed_each_time(conn: LocalEndpoint, code_dir: Path, sm: Any) -> None:
    conn.set_capacity({FIRST: 0, SECOND: 0})
    result, pushed = run_with_pushes(operator(code_dir), "third-1")
    assert result["status"] == "Completed"
    assert {"name": "dnn_group", "type": THIRD, "count": 2} in result["instance_groups"]
    assert [a["job_name"] for a in result["capacity_attempts"]] + [result["training_job_name"]] == pushed
    assert len(set(pushed)) == 3


def test_a_quota_refusal_skips_the_type_under_the_same_name(conn: LocalEndpoint, code_dir: Path, sm: Any) -> None:
    conn.set_quota({FIRST: 0})
    result, pushed = run_with_pushes(operator(code_dir), "quota-1")
    assert result["status"] == "Completed"
    [attempt] = result["capacity_attempts"]
    assert attempt["job_name"] is None
    assert attempt["reason"].startswith(f"ResourceLimitExceeded: The account-level service limit '{FIRST} for")
    assert pushed == [result["training_job_name"]]  # no job was created for the refused cluster
    assert dnn_type(sm.describe_training_job(TrainingJobName=result["training_job_name"])) == (SECOND, 1)


def test_capacity_freed_mid_chain_is_used(
    conn: LocalEndpoint, code_dir: Path, sm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn.set_capacity({FIRST: 0, SECOND: 0})
    op = operator(code_dir)
    from airflow_hetero.operators import capacity_fallback

    chosen = capacity_fallback.request_of_next

    def free_second_after_first_failure(task: Any, chain: Any, job: Any, request: dict[str, Any]) -> dict[str, Any]:
        if len(chain.attempts) == 1:
            conn.set_capacity({SECOND: 1})  # freed while the chain runs
        return chosen(task, chain, job, request)

    monkeypatch.setattr(capacity_fallback, "request_of_next", free_second_after_first_failure)
    result = op.execute(context("freed-1"))
    assert {"name": "dnn_group", "type": SECOND, "count": 1} in result["instance_groups"]
    assert len(result["capacity_attempts"]) == 1


def test_every_candidate_exhausted_fails_with_one_message(conn: LocalEndpoint, code_dir: Path, sm: Any) -> None:
    conn.set_capacity({FIRST: 0, SECOND: 0, THIRD: 0})
    ctx = context("exhausted-1")
    with pytest.raises(CapacityExhaustedError) as info:
        operator(code_dir).execute(ctx)
    pushed = [c.kwargs["value"] for c in ctx["ti"].xcom_push.call_args_list if c.kwargs["key"] == "capacity_attempts"]
    assert pushed[-1] == info.value.attempts  # a failed task has them too
    message = str(info.value)
    assert "every cluster was tried" in message and "3 attempts" in message
    for kind in (f"1 x {FIRST}", f"1 x {SECOND}", f"2 x {THIRD}"):
        assert kind in message
    assert message.count("CapacityError") == 3
    assert len(info.value.attempts) == 3


def test_capacity_attempts_bounds_the_chain(conn: LocalEndpoint, code_dir: Path) -> None:
    conn.set_capacity({FIRST: 0, SECOND: 0})
    with pytest.raises(CapacityExhaustedError, match=r"capacity=CapacityFallback\(attempts=2\) reached.*2 attempts"):
        operator(code_dir, capacity=CapacityFallback(attempts=2)).execute(context("bounded-1"))


def test_a_failure_not_about_capacity_never_falls_back(conn: LocalEndpoint, code_dir: Path, sm: Any) -> None:
    ctx = context("nan-1")
    with pytest.raises(TrainingJobFailedError) as info:
        operator(code_dir, "fail").execute(ctx)
    assert not isinstance(info.value, CapacityExhaustedError)
    assert "NaN" in str(info.value)
    pushed = [c.kwargs["value"] for c in ctx["ti"].xcom_push.call_args_list if c.kwargs["key"] == "training_job_name"]
    assert pushed == [info.value.job_name]
    assert len(jobs_of(sm, info.value.job_name)) == 1


class WorkerLost(BaseException):
    """The worker dies (not an Exception: nothing in the operator catches it)."""


@pytest.mark.parametrize("fallback_done", [False, True], ids=["fallback-running", "fallback-completed"])
def test_a_retry_re_attaches_to_the_newest_job_of_the_chain(
    conn: LocalEndpoint, code_dir: Path, sm: Any, monkeypatch: pytest.MonkeyPatch, fallback_done: bool
) -> None:
    """The retry finds the fallback job running, or (a slow retry: seen in make test) already completed;
    either way its result carries the attempt before it."""
    conn.set_capacity({FIRST: 0})
    run_id = f"lost-{'completed' if fallback_done else 'running'}"  # a task instance of its own
    first_try = operator(code_dir)
    waits: list[str] = []
    from airflow_hetero.operators.sync_wait import SyncWait

    real_wait = SyncWait.until_done

    def wait_then_die(self: SyncWait, describe: Any) -> dict[str, Any]:
        waits.append(self.name)
        if len(waits) == 2:  # the second attempt was created: the worker is lost
            raise WorkerLost
        return real_wait(self, describe)

    with monkeypatch.context() as patched, pytest.raises(WorkerLost):
        patched.setattr(SyncWait, "until_done", wait_then_die)
        first_try.execute(context(run_id))
    if fallback_done:
        sm.get_waiter("training_job_completed_or_stopped").wait(
            TrainingJobName=waits[1], WaiterConfig={"Delay": 1, "MaxAttempts": 300}
        )
    retry = operator(code_dir)
    logged = record_logs(retry)
    result = retry.execute(context(run_id))
    assert result["training_job_name"] == waits[1]
    assert [a["job_name"] for a in result["capacity_attempts"]] == [waits[0]]
    jobs = jobs_of(sm, waits[0])
    assert [j["TrainingJobName"] for j in jobs] == waits  # no attempt submitted twice
    assert_one_at_a_time(jobs)
    assert any("Re-attaching to training job" in line for line in logged.lines)


def test_deferred_falls_back_and_defers_again(conn: LocalEndpoint, code_dir: Path, sm: Any) -> None:
    conn.set_capacity({FIRST: 0})
    op = operator(code_dir, deferrable=True)
    ctx = context("deferred-1")
    with pytest.raises(TaskDeferred) as info:
        op.execute(ctx)
    deferrals = 0
    while True:
        deferrals += 1
        assert deferrals <= 3
        trigger, kwargs = info.value.trigger, info.value.kwargs or {}
        event = asyncio.run(asyncio.wait_for(anext(trigger.run()), 90))
        resumed = operator(code_dir, deferrable=True)  # a new worker resumes
        try:
            result = resumed.execute_complete(ctx, event.payload, **kwargs)
            break
        except TaskDeferred as again:
            info = pytest.ExceptionInfo.from_exc_info((type(again), again, again.__traceback__))
    assert deferrals == 2
    assert {"name": "dnn_group", "type": SECOND, "count": 1} in result["instance_groups"]
    [attempt] = result["capacity_attempts"]
    assert attempt["reason"].startswith("CapacityError")
    assert len(jobs_of(sm, attempt["job_name"])) == 2


def test_deferred_resumed_without_its_kwargs_still_falls_back(conn: LocalEndpoint, code_dir: Path, sm: Any) -> None:
    """``dag.test()`` (Airflow 3.3) resumes with the trigger's event only: the chain comes from the jobs."""
    conn.set_capacity({FIRST: 0})
    ctx = context("deferred-bare-1")
    with pytest.raises(TaskDeferred) as info:
        operator(code_dir, deferrable=True).execute(ctx)
    event = asyncio.run(asyncio.wait_for(anext(info.value.trigger.run()), 90))
    with pytest.raises(TaskDeferred) as again:  # the next cluster, not the task's failure
        operator(code_dir, deferrable=True).execute_complete(ctx, event.payload)
    event = asyncio.run(asyncio.wait_for(anext(again.value.trigger.run()), 90))
    result = operator(code_dir, deferrable=True).execute_complete(ctx, event.payload)
    assert {"name": "dnn_group", "type": SECOND, "count": 1} in result["instance_groups"]
    pushed = [c.kwargs["value"] for c in ctx["ti"].xcom_push.call_args_list if c.kwargs["key"] == "capacity_attempts"]
    [attempt] = pushed[-1]  # what the summary reads
    assert attempt["reason"].startswith("CapacityError") and len(jobs_of(sm, attempt["job_name"])) == 2
