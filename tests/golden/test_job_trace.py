"""A trace that shows the job (issue 36, item 2): spans per training job attempt, its phases, its events.

The operator runs against the golden matrix's stand-in (:mod:`support.golden_recorder`) with each step (execute,
each resume) inside a "task" span of an OpenTelemetry SDK tracer provider whose spans go to an
``InMemorySpanExporter``, as Airflow's task span encloses a task run when ``[traces] otel_on`` is set.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest
from golden_cases import BUDGET, FALLBACKS, JOB, MODES, QUEUE_CAPACITY_RETRY
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from support.golden_recorder import MAX_RUNTIME_EXCEEDED, NO_CAPACITY, TRAINING, Case, Step
from support.golden_tries import Tries, installing

from airflow_hetero.operators import job_trace

SPOT_INTERRUPTED = (
    TRAINING,
    Step("InProgress", "Interrupted", "Insufficient Spot capacity: the job was interrupted"),
    Step("InProgress", "Restarting", "Restarting the job from its checkpoint"),
    TRAINING,
    Step("Completed", "Completed", "Training job completed"),
)


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    """Finished spans of a provider of the test's own (the global one can be set once per process)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(job_trace, "tracer", lambda: provider.get_tracer(job_trace.SCOPE))
    yield exporter, provider
    provider.shutdown()


@pytest.fixture
def recording(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Tries], Tries]]:
    yield from installing(monkeypatch)


def traced(monkeypatch: pytest.MonkeyPatch, provider: TracerProvider, mode: str, **case: Any) -> Tries:
    """The tries of a case, each step inside a span named "task <step>" (Airflow's task span)."""
    task_tracer = provider.get_tracer("airflow.task")

    def around(step: str) -> contextlib.AbstractContextManager[Any]:
        return task_tracer.start_as_current_span(f"task {step}")

    operator = {"job": JOB, **MODES[mode], **case.pop("operator", {})}
    return Tries(Case(name="traced", about="", operator=operator, **case), monkeypatch, around=around)


@pytest.fixture
def run_traced(
    monkeypatch: pytest.MonkeyPatch, spans: Any, recording: Any
) -> Callable[..., tuple[InMemorySpanExporter, Tries]]:
    """Run a case to its end (each step in a task span): (the exporter, its tries)."""
    exporter, provider = spans

    def run(mode: str, **case: Any) -> tuple[InMemorySpanExporter, Tries]:
        t = recording(traced(monkeypatch, provider, mode, **case))
        t.execute()
        return exporter, t

    return run


def jobs_of(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith("sagemaker.training_job ")]


def phases_of(exporter: InMemorySpanExporter, job: ReadableSpan) -> list[ReadableSpan]:
    return [
        s for s in exporter.get_finished_spans() if s.parent is not None and s.parent.span_id == job.context.span_id
    ]


def ns(moment: datetime) -> int:
    return int(moment.timestamp() * 1e9)


def parent_name(exporter: InMemorySpanExporter, span: ReadableSpan) -> str | None:
    by_id = {s.context.span_id: s.name for s in exporter.get_finished_spans()}
    return None if span.parent is None else by_id.get(span.parent.span_id)


@pytest.mark.parametrize(("mode", "step"), [("direct_sync", "task execute"), ("direct_deferred", "task resume")])
def test_the_job_is_a_span_under_the_task_with_its_phases(mode: str, step: str, run_traced: Any) -> None:
    exporter, t = run_traced(mode)
    (job,) = jobs_of(exporter)
    assert parent_name(exporter, job) == step  # the deferred wait's span comes out when the task resumes
    name = t.last["returned"]["training_job_name"]
    attributes = dict(job.attributes or {})
    assert attributes["aws.sagemaker.training_job.name"] == name
    assert attributes["aws.sagemaker.training_job.arn"] == t.last["returned"]["training_job_arn"]
    assert attributes["cloud.region"] == "us-east-1" and attributes["airflow_hetero.mode"] == mode
    assert list(attributes["airflow_hetero.groups.types"]) == ["ml.c5.xlarge", "ml.g5.xlarge"]
    assert list(attributes["airflow_hetero.groups.counts"]) == [2, 1]
    fake = t.run.aws.job(name)
    phases = phases_of(exporter, job)
    assert [p.name for p in phases] == ["sagemaker.phase Starting", "sagemaker.phase Training"]
    for phase, transition in zip(phases, fake.transitions, strict=False):  # the transitions' own times
        assert phase.start_time == ns(transition["StartTime"]) and phase.end_time == ns(transition["EndTime"])
    assert job.start_time == ns(fake.created) and job.end_time == ns(fake.transitions[-1]["StartTime"])


def test_a_capacity_fallback_is_an_event_and_each_cluster_a_span(run_traced: Any) -> None:
    exporter, _ = run_traced("direct_sync", operator=FALLBACKS, training=(NO_CAPACITY,))
    failed, ran = jobs_of(exporter)
    assert [e.name for e in failed.events] == ["capacity_fallback"]
    assert failed.status.status_code.name == "ERROR" and ran.status.status_code.name == "UNSET"
    assert [s.attributes["airflow_hetero.capacity.attempt"] for s in (failed, ran)] == [1, 2]  # type: ignore[index]
    assert list(ran.attributes["airflow_hetero.groups.types"]) == ["ml.c5.xlarge", "ml.g5.2xlarge"]  # type: ignore[index]


def test_a_budget_stop_is_an_event_with_the_budget(run_traced: Any) -> None:
    exporter, t = run_traced("direct_sync", operator=BUDGET, training=((TRAINING, MAX_RUNTIME_EXCEEDED),))
    assert "raised" in t.last
    (job,) = jobs_of(exporter)
    assert [e.name for e in job.events] == ["budget_stop"]
    assert job.attributes["airflow_hetero.budget.max_cost"] == 2.0  # type: ignore[index]
    assert job.attributes["aws.sagemaker.training_job.max_runtime_seconds"] < 7200  # type: ignore[index,operator]


def test_a_spot_interruption_is_an_event_and_a_phase(run_traced: Any) -> None:
    exporter, _ = run_traced("direct_sync", training=(SPOT_INTERRUPTED,))
    (job,) = jobs_of(exporter)
    assert [e.name for e in job.events] == ["spot_interruption"]
    assert [p.name.split()[-1] for p in phases_of(exporter, job)] == [
        "Starting",
        "Training",
        "Interrupted",
        "Restarting",
        "Training",
    ]


def test_a_queue_requeue_is_an_event_on_the_attempt_batch_requeued(run_traced: Any) -> None:
    exporter, t = run_traced("queue_deferred", services=(QUEUE_CAPACITY_RETRY,))
    assert "returned" in t.last
    first, second = jobs_of(exporter)
    assert [e.name for e in first.events] == ["queue_requeue"] and list(second.events) == []
    assert [s.attributes["airflow_hetero.queue.attempt"] for s in (first, second)] == [1, 2]  # type: ignore[index]
    assert first.attributes["aws.batch.service_job.id"] == t.last["returned"]["service_job"]["job_id"]  # type: ignore[index]


def test_a_tracing_error_never_fails_the_task(monkeypatch: pytest.MonkeyPatch, run_traced: Any) -> None:
    def broken(*_: Any, **__: Any) -> None:
        raise RuntimeError("the exporter is gone")

    monkeypatch.setattr(job_trace, "emit_job_span", broken)
    _, t = run_traced("direct_sync")
    assert "returned" in t.last


def test_tracing_off_builds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenTelemetry's own default (a proxy with no provider set): no tracer, so nothing is built."""
    from opentelemetry import trace

    monkeypatch.setattr(trace, "get_tracer_provider", trace.ProxyTracerProvider)
    assert job_trace.tracer() is None
    monkeypatch.setattr(job_trace, "emit_job_span", lambda *a, **k: pytest.fail("built a span with tracing off"))
    job_trace.trace_job({"TrainingJobName": "x"}, {"mode": "direct_sync"})


def test_the_summary_adds_each_group_to_its_task_span(spans: Any) -> None:
    from airflow_hetero.operators.log_summary import trace_summary

    exporter, provider = spans
    verdict = {
        "kind": "bottleneck",
        "bottleneck": "data_group",
        "groups": {"data_group": {"busy_percent": 97.5, "state": "saturated"}},
    }
    cost = {"groups": {"data_group": {"cost": 1.25}, "train_group": {"cost": 3.5}}}
    with provider.get_tracer("airflow.task").start_as_current_span("summarize"):
        trace_summary(verdict, cost)
    (span,) = exporter.get_finished_spans()
    assert dict(span.attributes or {}) == {
        "airflow_hetero.group.data_group.busy_percent": 97.5,
        "airflow_hetero.group.data_group.state": "saturated",
        "airflow_hetero.group.data_group.cost": 1.25,
        "airflow_hetero.group.train_group.cost": 3.5,
        "airflow_hetero.verdict.kind": "bottleneck",
        "airflow_hetero.verdict.bottleneck": "data_group",
    }
