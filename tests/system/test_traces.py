"""Traces on the production-shaped Airflow (``[traces] otel_on``, OTLP/HTTP to the test's receiver on 127.0.0.1).

Each deferred run's training job is a span whose parent is Airflow's own task span (``worker.train`` of the run
that resumed), with the job's phases as its children: emitted by the resumed task, timed by the job's transitions.
"""

from __future__ import annotations

from support.process_group import wait_until
from support.system_airflow import Stack
from support.system_jobs import jobs_of

#: How long the spans of finished tasks may take to reach the receiver (each task process flushes as it ends).
EXPORT_TIMEOUT = 60


def test_each_job_is_a_span_under_airflows_task_span(stack: Stack, deferred_runs: tuple[list[str], int]) -> None:
    runs, _ = deferred_runs
    receiver = stack.traces
    assert receiver is not None
    jobs = jobs_of(stack, "system_deferred").items()
    names = {run: found[0]["name"] for (run, task), found in jobs if task == "train" and run in runs}

    def job_spans() -> dict[str, object] | None:
        spans = {s.name: s for s in receiver.snapshot()}
        found = {run: spans.get(f"sagemaker.training_job {name}") for run, name in names.items()}
        return found if all(found.values()) else None

    wait_until("a span of every deferred run's job", job_spans, EXPORT_TIMEOUT, 1)
    spans = receiver.snapshot()
    by_id = {s.span_id: s for s in spans}
    for run, name in names.items():
        (job,) = [s for s in spans if s.name == f"sagemaker.training_job {name}"]
        task = by_id[job.parent_span_id]
        assert task.name == "worker.train", task
        assert task.attributes["airflow.dag_run.run_id"] == run and task.trace_id == job.trace_id
        assert job.attributes["aws.sagemaker.training_job.name"] == name
        assert job.attributes["airflow_hetero.mode"] == "direct_deferred"
        phases = [s.name for s in spans if s.parent_span_id == job.span_id]
        assert "sagemaker.phase Training" in phases, phases
        assert job.start_ns < task.start_ns  # the job's own CreationTime: before the resumed task's span began
