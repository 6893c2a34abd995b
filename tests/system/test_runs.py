"""Runs on the production-shaped Airflow: exactly one job per task instance, whatever is killed or marked.

Jobs are counted on the offline endpoint by the identity tags the operator stamps on each
(:func:`support.system_jobs.jobs_of`), "running" too: the endpoint is shared by every test of the
session, so a job another test left in progress is not this one's.
"""

from __future__ import annotations

import signal
import time
from typing import Any

import psutil
from support.openlineage_file import airflow_run_id, read_events
from support.openlineage_schemas import event_problems
from support.process_group import wait_until
from support.system_airflow import DONE, Stack, run_path, wait_for_state
from support.system_jobs import describe, jobs_of


def running_jobs(stack: Stack, dag_id: str, runs: list[str]) -> list[str]:
    """Names of the jobs of ``dag_id``'s ``runs`` (by their identity tags) the endpoint has in progress."""
    ours = [job for (run, _), jobs in jobs_of(stack, dag_id).items() if run in runs for job in jobs]
    return sorted(job["name"] for job in ours if job["status"] == "InProgress")


def one_job_each(stack: Stack, dag_id: str, runs: list[str], status: str = "Completed") -> dict[str, dict[str, Any]]:
    """The one ``train`` job of each run (exactly one, in ``status``); by run id."""
    jobs = {run: found for (run, task), found in jobs_of(stack, dag_id).items() if task == "train" and run in runs}
    assert sorted(jobs) == sorted(runs), jobs
    counts = {run: len(found) for run, found in jobs.items()}
    assert set(counts.values()) == {1}, f"jobs per task instance: {counts}"
    assert {run: found[0]["status"] for run, found in jobs.items()} == dict.fromkeys(runs, status)
    return {run: found[0] for run, found in jobs.items()}


def test_n_deferred_runs_at_once_make_exactly_n_jobs(stack: Stack, deferred_runs: tuple[list[str], int]) -> None:
    runs, most = deferred_runs
    n = len(runs)
    assert [stack.rest("GET", run_path("system_deferred", r))["state"] for r in runs] == ["success"] * n
    assert most == n, f"at most {most} of {n} train tasks were deferred at the same time"
    jobs = one_job_each(stack, "system_deferred", runs)
    assert len({j["name"] for j in jobs.values()}) == n
    for run in runs:
        train = stack.task_instance("system_deferred", run, "train")
        assert train["try_number"] == 1, train
    assert running_jobs(stack, "system_deferred", runs) == []


def test_a_triggerer_killed_and_restarted_while_jobs_wait_makes_no_second_job(stack: Stack) -> None:
    runs = [f"triggerer-{i}" for i in range(3)]
    release = stack.root / "release-triggerer"  # the jobs run until the new triggerer is started
    for run in runs:
        stack.trigger("system_deferred", run, seconds=5, release_file=str(release))
    try:
        wait_until(
            "every train task deferred",
            lambda: stack.states("system_deferred", runs) == ["deferred"] * 3,
            120,
            detail=stack.logs,
        )
        assert len(running_jobs(stack, "system_deferred", runs)) == 3
        stack.procs.kill("triggerer", signal.SIGKILL)
        time.sleep(3)  # the jobs go on; nobody watches them
        assert stack.states("system_deferred", runs) == ["deferred"] * 3
        assert len(running_jobs(stack, "system_deferred", runs)) == 3
    finally:
        try:  # whatever went wrong after the kill, the tests after this one have a triggerer
            if stack.procs.started["triggerer"].proc.poll() is not None:
                stack.start_triggerer()
        finally:  # and the jobs end (else they hold the endpoint's hosts for ten minutes)
            release.touch()
    for run in runs:
        assert wait_for_state(stack, run_path("system_deferred", run), DONE, 240)["state"] == "success"
    one_job_each(stack, "system_deferred", runs)
    for run in runs:
        assert stack.task_instance("system_deferred", run, "train")["try_number"] == 1


def worker_running(stack: Stack, ti_id: str) -> str:
    """The Celery worker whose process tree runs task instance ``ti_id`` (the task process's title names it)."""
    for name in ("worker-1", "worker-2"):
        root = psutil.Process(stack.procs.started[name].proc.pid)
        for proc in root.children(recursive=True):
            try:
                if any(ti_id in part for part in proc.cmdline()):
                    return name
            except psutil.NoSuchProcess:
                continue
    return ""


def start_sync_run(stack: Stack, run: str, seconds: int) -> str:
    """Start a ``system_sync`` run whose job lasts ``seconds``; the job's name once it is in progress."""
    stack.trigger("system_sync", run, seconds=seconds)
    in_progress = wait_until(
        f"the job of {run} in progress",
        lambda: running_jobs(stack, "system_sync", [run]),
        120,
        detail=stack.logs,
    )
    return in_progress[0]


def test_a_worker_killed_during_a_synchronous_wait_re_attaches_on_retry(stack: Stack) -> None:
    run = "worker-killed"
    job = start_sync_run(stack, run, seconds=45)
    first = stack.task_instance("system_sync", run, "train")
    assert first["state"] == "running" and first["try_number"] == 1, first
    worker = wait_until("the worker running the task", lambda: worker_running(stack, first["id"]), 30)
    stack.procs.kill(worker, signal.SIGKILL)  # the machine is gone: worker, pool and task process at once
    stack.start_worker(int(worker.rsplit("-", 1)[1]))
    final = wait_for_state(stack, run_path("system_sync", run), DONE, 300)
    assert final["state"] == "success"
    second = stack.task_instance("system_sync", run, "train")
    assert second["try_number"] == 2, second
    (only,) = one_job_each(stack, "system_sync", [run]).values()
    assert only["name"] == job


def lineage_failure(stack: Stack, run: str) -> dict[str, Any] | None:
    """The OpenLineage FAIL event of ``run``'s ``system_sync`` train task that names its job (the task process's;
    the api-server emits one too for a state set through the API, without the task's facets)."""
    for event in read_events(stack.lineage):
        facets = event["run"]["facets"]
        if event["eventType"] == "FAIL" and airflow_run_id(event) == run and "externalQuery" in facets:
            return event
    return None


def test_mark_failed_through_the_rest_api_stops_the_job(stack: Stack) -> None:
    run = "marked-failed"
    job = start_sync_run(stack, run, seconds=600)
    wait_until("the task running", lambda: stack.task_instance("system_sync", run, "train")["state"] == "running", 60)
    marked = time.monotonic()
    stack.rest("PATCH", f"{run_path('system_sync', run)}/taskInstances/train", {"new_state": "failed"})
    ended = wait_until(
        "the job stopped",
        lambda: (answer := describe(stack, job))["TrainingJobStatus"] in ("Stopped", "Failed", "Completed") and answer,
        60,
        0.5,
        detail=stack.logs,
    )
    took = time.monotonic() - marked
    assert ended["TrainingJobStatus"] == "Stopped", ended.get("FailureReason")
    print(f"\njob stopped {took:.1f} s after mark failed")
    assert wait_for_state(stack, run_path("system_sync", run), DONE, 60)["state"] == "failed"
    assert stack.task_instance("system_sync", run, "train")["state"] == "failed"
    one_job_each(stack, "system_sync", [run], status="Stopped")
    assert running_jobs(stack, "system_sync", [run]) == []
    # the task's OpenLineage FAIL event names the job it stopped (docs/lineage.md)
    failure = wait_until("the train task's FAIL event naming its job", lambda: lineage_failure(stack, run), 60, 1)
    assert failure["run"]["facets"]["externalQuery"]["externalQueryId"] == ended["TrainingJobArn"]
    assert job in failure["run"]["facets"]["errorMessage"]["message"]
    same_run = [e for e in read_events(stack.lineage) if e["run"]["runId"] == failure["run"]["runId"]]
    assert {e["eventType"] for e in same_run} == {"START", "FAIL"}
    assert [problem for e in same_run for problem in event_problems(e)] == []


def test_the_summary_xcom_reads_back_through_the_rest_api(stack: Stack, deferred_runs: tuple[list[str], int]) -> None:
    run = deferred_runs[0][0]
    (job,) = one_job_each(stack, "system_deferred", [run]).values()
    entry = stack.rest(
        "GET", f"{run_path('system_deferred', run)}/taskInstances/summarize/xcomEntries/return_value?deserialize=true"
    )
    summary = entry["value"]
    assert summary["training_job_name"] == job["name"]
    assert summary["status"] == "Completed"
    assert set(summary["groups"]) == {"data_group", "train_group"}
    for name, group in summary["groups"].items():
        assert group["instance_count"] == 1, (name, group)
        assert group["errors"] == 0, (name, group)
    assert summary["groups"]["train_group"]["metrics"]["train:loss"]["last"] < 0.1
    result = stack.rest(
        "GET", f"{run_path('system_deferred', run)}/taskInstances/train/xcomEntries/return_value?deserialize=true"
    )["value"]
    assert result["training_job_name"] == job["name"]
