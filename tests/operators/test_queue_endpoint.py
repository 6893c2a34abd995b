"""Queue mode against the offline endpoint's AWS Batch queue: real service jobs, attempts and training jobs.

Gated jobs (support.batch_jobs) end when the test releases them, so every wait is for an event. The queue
``one`` holds one instance: tasks submitted together run one after another. A task "killed" mid-wait is one
whose execute left (it deferred); its retry is a new operator for the same task instance.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import pytest
from support.batch_jobs import gated_payload, release, until, wait_status
from support.fault_proxy import FaultProxy, fault_proxy
from support.local_jobkit import BUCKET
from support.task_logs import record_logs

from airflow_hetero import sagemaker_facts as facts
from airflow_hetero._compat import AirflowFailException, TaskDeferred
from airflow_hetero._retry import RetryPolicy
from airflow_hetero.hooks.batch import HeteroBatchHook
from airflow_hetero.local import BatchOptions, LocalEndpoint, RunOptions
from airflow_hetero.operators import BatchQueue, HeteroTrainingOperator

pytestmark = pytest.mark.slow

CONN_ID = "queued_endpoint"
C5 = "ml.c5.xlarge"


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalEndpoint]:
    with LocalEndpoint(
        workdir=tmp_path_factory.mktemp("endpoint"),
        run=RunOptions(stop_grace=1.0, log_flush_interval=0.2),
        batch=BatchOptions(poll_interval=0.05, requeue_delay=0.3),
        batch_queues={"one": 1},
    ) as ep:
        ep.client("s3").create_bucket(Bucket=BUCKET)
        yield ep


@pytest.fixture
def conn(endpoint: LocalEndpoint, monkeypatch: pytest.MonkeyPatch) -> LocalEndpoint:
    for name, value in endpoint.environ(CONN_ID).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(HeteroBatchHook, "default_retry_policy", RetryPolicy(3, 0.01, 0.05))
    return endpoint


def ti(run_id: str) -> MagicMock:
    return MagicMock(dag_id="queued", task_id="train", run_id=run_id, map_index=-1)


def operator(endpoint: LocalEndpoint, gate: Path, gate_name: str, **kwargs: Any) -> HeteroTrainingOperator:
    groups = kwargs.pop("groups", ((("main", C5, 1)),))
    payload = json.loads(gated_payload(endpoint.client("s3"), gate, gate_name, groups))
    kwargs.setdefault("batch_queue", "one")
    kwargs.setdefault("deferrable", False)
    kwargs.setdefault("check_interval", 0.1)
    return HeteroTrainingOperator(task_id="train", request=payload, aws_conn_id=CONN_ID, **kwargs)


def controlled(control: Any) -> Any:
    """Run the test's own side (releases, capacity, checks: no Airflow code) in a thread while the task runs
    in the main thread (Airflow's task code stays where a worker runs it); a context manager that joins it and
    re-raises what it raised."""
    import contextlib

    @contextlib.contextmanager
    def running() -> Iterator[None]:
        failures: list[BaseException] = []

        def work() -> None:
            try:
                control()
            except BaseException as err:
                failures.append(err)

        thread = threading.Thread(target=work)
        thread.start()
        yield
        thread.join(180)
        assert not thread.is_alive(), "the test's side did not finish"
        if failures:
            raise failures[0]

    return running()


def drive(op: HeteroTrainingOperator, context: Any, first: TaskDeferred | None = None) -> dict[str, Any]:
    """Run a deferrable task to its end: each trigger until its event, then the method it resumes."""

    async def event_of(trigger: Any) -> dict[str, Any]:
        async for event in trigger.run():
            return dict(event.payload)
        raise AssertionError("no event")

    deferred = first
    if deferred is None:
        try:
            return op.execute(context)
        except TaskDeferred as err:
            deferred = err
    for _ in range(10):
        event = asyncio.run(asyncio.wait_for(event_of(deferred.trigger), 120))
        try:
            result: dict[str, Any] = getattr(op, deferred.method_name)(context, event, **(deferred.kwargs or {}))
            return result
        except TaskDeferred as err:
            deferred = err
    raise AssertionError("too many deferrals")


def service_jobs(endpoint: LocalEndpoint, name_prefix: str) -> list[dict[str, Any]]:
    batch = endpoint.client("batch")
    listed = batch.list_service_jobs(filters=[{"name": "JOB_NAME", "values": [name_prefix + "*"]}])
    return list(listed["jobSummaryList"])


def service_job_of(context: Any) -> dict[str, Any]:
    pushed = [c.kwargs["value"] for c in context["ti"].xcom_push.call_args_list if c.kwargs.get("key") == "service_job"]
    return dict(pushed[-1])


def training_jobs(endpoint: LocalEndpoint, payload_name: str) -> list[str]:
    sm = endpoint.client("sagemaker")
    listed = sm.list_training_jobs(NameContains=payload_name, MaxResults=100)["TrainingJobSummaries"]
    return [s["TrainingJobName"] for s in listed]


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
def test_tasks_into_a_smaller_queue_run_one_after_another(
    conn: LocalEndpoint, tmp_path: Path, deferrable: bool
) -> None:
    batch = conn.client("batch")
    kind = "d" if deferrable else "s"
    contexts = {g: {"ti": ti(f"{kind}-{g}")} for g in ("a", "b")}
    for g in ("a", "b"):  # both submitted, a first; then each task (a retry of it) waits
        operator(conn, tmp_path, f"{kind}{g}", wait_for_completion=False).execute(contexts[g])
    ids = {g: service_job_of(contexts[g])["job_id"] for g in contexts}
    ops = {g: operator(conn, tmp_path, f"{kind}{g}", deferrable=deferrable, print_log=True) for g in contexts}
    logs = {g: record_logs(op) for g, op in ops.items()}

    def control() -> None:
        wait_status(batch, ids["a"], "RUNNING")  # first in, first out
        wait_status(batch, ids["b"], "RUNNABLE")  # the queue holds one instance
        until(lambda: "place 1 in the queue" in logs["b"].text() or deferrable, "b to say its place")
        release(tmp_path, f"{kind}a")
        wait_status(batch, ids["b"], "RUNNING")
        assert batch.describe_service_job(jobId=ids["a"])["status"] == "SUCCEEDED"  # never both at once
        release(tmp_path, f"{kind}b")

    with controlled(control):
        results = {g: drive(ops[g], contexts[g]) for g in ("b", "a")}  # b waits in the queue while a runs
    assert {results[g]["service_job"]["status"] for g in contexts} == {"SUCCEEDED"}
    assert results["b"]["training_job_name"].startswith(facts.BATCH_TRAINING_JOB_PREFIX)
    if not deferrable:
        text = logs["b"].text()
        assert "RUNNABLE" in text and "place 1 in the queue" in text
        assert f"[main/algo-1] released {kind}b" in text  # the attempt's log, [group/host]


@pytest.mark.parametrize("fault", ["reset_after", "500_after"])
def test_a_lost_submit_answer_adopts_the_first_job(
    conn: LocalEndpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    with fault_proxy(conn.url) as proxy:
        for name, value in conn.environ(CONN_ID).items():
            monkeypatch.setenv(name, value.replace(conn.url, proxy.url))
        proxy.fail("SubmitServiceJob", fault)
        _adopt_once(conn, proxy, tmp_path, f"lost-{fault}")


def test_a_refused_client_token_adopts_the_first_job(
    conn: LocalEndpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The answer is lost and the first look-up misses the job (listing lag): the resend, same clientToken, is
    refused, and the second look-up adopts the first job."""
    with fault_proxy(conn.url) as proxy:
        for name, value in conn.environ(CONN_ID).items():
            monkeypatch.setenv(name, value.replace(conn.url, proxy.url))
        proxy.fail("SubmitServiceJob", "reset_after")
        find = HeteroBatchHook.find_service_jobs
        misses = iter([True, True])  # the walk's look-up before the submit, then the first after the lost answer

        def lagging(self: HeteroBatchHook, name: str) -> list[dict[str, Any]]:
            return [] if next(misses, False) else find(self, name)

        monkeypatch.setattr(HeteroBatchHook, "find_service_jobs", lagging)
        _adopt_once(conn, proxy, tmp_path, "token", sent=2)


def _adopt_once(conn: LocalEndpoint, proxy: FaultProxy, gate: Path, gate_name: str, sent: int = 1) -> None:
    op = operator(conn, gate, gate_name, wait_for_completion=False)
    logs = record_logs(op)
    context: Any = {"ti": ti(f"adopt-{gate_name}")}
    result = op.execute(context)
    assert proxy.forwarded["SubmitServiceJob"] == sent
    name = result["service_job"]["job_name"]
    assert len(service_jobs(conn, name)) == 1
    assert "Adopted (the submit's answer was lost) service job" in logs.text()
    release(gate, gate_name)
    wait_status(conn.client("batch"), result["service_job"]["job_id"], "SUCCEEDED")
    assert len(training_jobs(conn, name)) == 1  # one service job, one training job


def test_a_retry_re_attaches_while_runnable_and_while_running(conn: LocalEndpoint, tmp_path: Path) -> None:
    batch = conn.client("batch")
    blocker: Any = {"ti": ti("blocker")}
    first = operator(conn, tmp_path, "blocker", deferrable=True)
    with pytest.raises(TaskDeferred):
        first.execute(blocker)
    wait_status(batch, service_job_of(blocker)["job_id"], "RUNNING")
    context: Any = {"ti": ti("retried")}
    with pytest.raises(TaskDeferred):  # the worker leaves while the job is RUNNABLE
        operator(conn, tmp_path, "retried", deferrable=True).execute(context)
    job_id = service_job_of(context)["job_id"]
    assert batch.describe_service_job(jobId=job_id)["status"] == "RUNNABLE"
    retry = operator(conn, tmp_path, "retried", deferrable=True)
    logs = record_logs(retry)
    with pytest.raises(TaskDeferred):
        retry.execute(context)
    assert "Re-attaching to service job" in logs.text() and service_job_of(context)["job_id"] == job_id
    release(tmp_path, "blocker")
    wait_status(batch, job_id, "RUNNING")
    again = operator(conn, tmp_path, "retried", deferrable=False)  # the worker left while RUNNING
    logs = record_logs(again)

    def control() -> None:
        until(lambda: "Re-attaching to service job" in logs.text(), "the re-attach")
        release(tmp_path, "retried")

    with controlled(control):
        assert again.execute(context)["service_job"]["status"] == "SUCCEEDED"
    name = service_job_of(context)["job_name"]
    assert len(service_jobs(conn, name)) == 1 and len(training_jobs(conn, name)) == 1


def test_a_task_cleared_while_runnable_terminates_it_before_any_training_job(
    conn: LocalEndpoint, tmp_path: Path
) -> None:
    batch = conn.client("batch")
    blocker: Any = {"ti": ti("blocker2")}
    with pytest.raises(TaskDeferred):
        operator(conn, tmp_path, "blocker2", deferrable=True).execute(blocker)
    wait_status(batch, service_job_of(blocker)["job_id"], "RUNNING")
    context: Any = {"ti": ti("cleared")}
    op = operator(conn, tmp_path, "cleared", deferrable=True)
    with pytest.raises(TaskDeferred):
        op.execute(context)
    job = service_job_of(context)
    assert op.stop_own_job(context) == job["job_name"]  # what a cleared / failed deferral does
    ended = wait_status(batch, job["job_id"], "FAILED")
    assert not ended.get("attempts") and not training_jobs(conn, job["job_name"])
    release(tmp_path, "blocker2")
    wait_status(batch, service_job_of(blocker)["job_id"], "SUCCEEDED")


def test_a_too_large_job_fails_naming_the_reason(conn: LocalEndpoint, tmp_path: Path) -> None:
    op = operator(conn, tmp_path, "large", groups=(("a", C5, 1), ("b", C5, 1)))
    context: Any = {"ti": ti("large")}
    with pytest.raises(AirflowFailException, match="MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE"):
        op.execute(context)
    assert conn.client("batch").describe_service_job(jobId=service_job_of(context)["job_id"])["isTerminated"]


def test_a_bad_request_is_refused_before_anything_is_submitted(conn: LocalEndpoint, tmp_path: Path) -> None:
    op = operator(conn, tmp_path, "bad")
    assert isinstance(op.request, dict)
    op.request = {**op.request, "HyperParameters": {f"k{i}": "x" * 300 for i in range(40)}}
    context: Any = {"ti": ti("bad")}
    with pytest.raises(AirflowFailException, match="at most 10240"):
        op.execute(context)
    assert not [c for c in context["ti"].xcom_push.call_args_list if c.kwargs.get("key") == "service_job"]


def test_a_capacity_requeue_is_followed_and_summarised_with_every_attempt_costed(
    conn: LocalEndpoint, tmp_path: Path
) -> None:
    """After a capacity requeue the task follows the next attempt (its log names attempt 2; the requeue's own line
    shows only when a poll falls between the attempts); the summary is the latest attempt's, every attempt costed
    (one requeued job for both: a capacity requeue is the slowest scenario of the module)."""
    from airflow_hetero.operators.log_summary import HeteroLogSummaryOperator

    conn.set_capacity({C5: 0})  # the first attempt fails for lack of capacity (no billable time), Batch requeues
    op = operator(conn, tmp_path, "summarised", batch_queue=BatchQueue("one", retry_strategy=1))
    logs = record_logs(op)
    context: Any = {"ti": ti("summarised")}

    def control() -> None:
        try:
            until(lambda: "back in the queue" in logs.text() or "attempt 2" in logs.text(), "a requeue", 120)
        finally:
            conn.set_capacity({C5: None})
        until(lambda: "attempt 2 is training job" in logs.text(), "the next attempt", 120)
        release(tmp_path, "summarised")

    with controlled(control):
        result = op.execute(context)
    assert result["service_job"]["status"] == "SUCCEEDED"
    attempts = result["service_job"]["attempts"]
    assert len(attempts) >= 2 and attempts[-1] == result["training_job_name"].lower()  # ARNs' names: lower case
    pushed = {c.kwargs["key"]: c.kwargs["value"] for c in context["ti"].xcom_push.call_args_list}
    summary_ti = MagicMock(dag_id="queued", task_id="summary", run_id="summarised", map_index=-1)
    summary_ti.xcom_pull.side_effect = lambda task_ids, key: pushed.get(key) if task_ids == "train" else None
    summarize = HeteroLogSummaryOperator(
        task_id="summary",
        training_task_id="train",
        aws_conn_id=CONN_ID,
        include_metrics=False,
        prices={C5: 0.5},
        use_pricing_api=False,
    )
    summary: Any = summarize.execute({"ti": summary_ti})  # type: ignore[arg-type]
    assert summary["training_job_name"] == result["training_job_name"]  # the latest attempt's groups and logs
    queue = summary["queue_attempts"]
    named = [a["training_job"] for a in queue["attempts"]]  # as DescribeTrainingJob spells them
    assert [n.lower() for n in named] == attempts and named[0].startswith("AWSBatch")
    assert queue["service_job"] == result["service_job"]["job_name"] and queue["job_queue"]
    first = queue["attempts"][0]
    assert (first["status"], first["billable_seconds"], first["cost"]) == ("Failed", 0, 0.0)  # no capacity: no bill
    latest = summary["cost"]["total"]
    assert latest is not None and queue["attempts"][-1]["cost"] == latest
    assert queue["earlier_cost"] == 0.0 and queue["total"] == latest
    costs = [c.kwargs["value"] for c in summary_ti.xcom_push.call_args_list if c.kwargs["key"] == "cost"]
    assert costs[-1]["attempts"] == len(attempts) and costs[-1]["attempts_total"] == queue["total"]
