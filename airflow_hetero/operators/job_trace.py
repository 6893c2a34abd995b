"""OpenTelemetry spans for the training jobs a task waited on (Airflow 3.2.1+ ``[traces] otel_on``, docs/deployment.md).

Under the task's current span (Airflow's own task span when tracing is on), each training job attempt is one span,
emitted when the task learns that the job ended, with the job's own times: CreationTime to TrainingEndTime. Its
attributes say which job (name, ARN, region, the mode), its groups (type and count of each), the capacity attempt,
the right-sizing decision and the budget cap; a child span per SageMaker phase, timed from the job's
``SecondaryStatusTransitions`` (:mod:`airflow_hetero.job.phases`), so a wait in the triggerer shows the same spans,
emitted when the task resumes; events for a capacity fallback, a budget stop, a spot interruption and a queue
requeue. The summary task adds each group's busy %, cost and the verdict to its own span
(:func:`summary_attributes`).

Tracing off costs nothing: without OpenTelemetry imported, or with no tracer provider set (OpenTelemetry's proxy,
Airflow's setting off), nothing is built. Never fails a task: an error here is logged and dropped.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

    from airflow_hetero.operators.run_state import TrainingRun
    from airflow_hetero.operators.task_settings import RunSettings

log = logging.getLogger(__name__)

#: The instrumentation scope's name (``otel.scope.name`` of every span).
SCOPE = "airflow_hetero"
#: Prefix of this package's own attributes (the others follow OpenTelemetry's ``aws.*`` and ``cloud.*``).
PREFIX = "airflow_hetero"


def tracer() -> Tracer | None:
    """The package's tracer when a tracer provider is set; None otherwise (nothing is built then)."""
    module = sys.modules.get("opentelemetry.trace")
    if module is None:  # never imported: nobody configured tracing in this process
        return None
    provider = module.get_tracer_provider()
    if isinstance(provider, module.ProxyTracerProvider | module.NoOpTracerProvider):
        return None
    found: Tracer = module.get_tracer(SCOPE)
    return found


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


def job_attributes(describe: Mapping[str, Any], *, mode: str, region: str | None) -> dict[str, Any]:
    """The job's own attributes: name, ARN, region, the task's mode, its groups and its runtime limit."""
    from airflow_hetero.job.resource_config import stated_groups

    groups = stated_groups(dict(describe))
    stopping = describe.get("StoppingCondition") or {}
    out: dict[str, Any] = {
        "aws.sagemaker.training_job.name": str(describe.get("TrainingJobName")),
        "aws.sagemaker.training_job.arn": str(describe.get("TrainingJobArn") or ""),
        "aws.sagemaker.training_job.status": str(describe.get("TrainingJobStatus")),
        "cloud.region": region or "",
        f"{PREFIX}.mode": mode,
        f"{PREFIX}.groups.names": [str(g.get("name") or "") for g in groups],
        f"{PREFIX}.groups.types": [str(g.get("type") or "") for g in groups],
        f"{PREFIX}.groups.counts": [int(g.get("count") or 0) for g in groups],
    }
    if stopping.get("MaxRuntimeInSeconds") is not None:
        out["aws.sagemaker.training_job.max_runtime_seconds"] = int(stopping["MaxRuntimeInSeconds"])
    for group in groups:
        out[f"{PREFIX}.group.{group.get('name') or 'cluster'}"] = f"{group.get('count')} x {group.get('type')}"
    return out


def job_events(describe: Mapping[str, Any], *, capacity_fallback: bool, budget_stop: str | None) -> list[Event]:
    """The attempt's events: each spot interruption, a capacity fallback after it, a budget stop."""
    from airflow_hetero.job.phases import SPOT_INTERRUPTED, epoch, job_window

    _, end = job_window(describe, time.time())
    out = [
        Event("spot_interruption", epoch(t.get("StartTime")) or end, {"message": str(t.get("StatusMessage") or "")})
        for t in describe.get("SecondaryStatusTransitions") or []
        if t.get("Status") == SPOT_INTERRUPTED
    ]
    reason = str(describe.get("FailureReason") or "")
    if capacity_fallback:
        out.append(Event("capacity_fallback", end, {"reason": reason}))
    if budget_stop:
        out.append(Event("budget_stop", end, {"message": budget_stop}))
    return out


class Event:
    """A span event: its name, time (epoch seconds) and attributes."""

    def __init__(self, name: str, at: float, attributes: Mapping[str, Any]) -> None:
        self.name, self.at, self.attributes = name, at, dict(attributes)


def emit_job_span(
    describe: Mapping[str, Any], attributes: Mapping[str, Any], events: Sequence[Event], found: Tracer | None = None
) -> Span | None:
    """One span for the job (its phases as children, ``events`` on it), ended at the job's end; None when tracing
    is off."""
    from opentelemetry import trace
    from opentelemetry.trace import Status, StatusCode

    from airflow_hetero.job.phases import job_window, phases

    use = found or tracer()
    if use is None:
        return None
    now = time.time()
    start, end = job_window(describe, now)
    name = f"sagemaker.training_job {describe.get('TrainingJobName')}"
    span = use.start_span(name, start_time=_ns(start), attributes=dict(attributes), kind=trace.SpanKind.CLIENT)
    inside = trace.set_span_in_context(span)
    for phase in phases(describe, now):
        child = use.start_span(
            f"sagemaker.phase {phase.status}",
            context=inside,
            start_time=_ns(phase.start),
            attributes={"aws.sagemaker.secondary_status": phase.status, f"{PREFIX}.status_message": phase.message},
        )
        child.end(end_time=_ns(phase.end))
    for event in events:
        span.add_event(event.name, attributes=event.attributes, timestamp=_ns(event.at))
    if describe.get("TrainingJobStatus") in ("Failed", "Stopped"):
        span.set_status(Status(StatusCode.ERROR, str(describe.get("FailureReason") or describe.get("SecondaryStatus"))))
    span.end(end_time=_ns(end))
    return span


def trace_job(describe: Mapping[str, Any] | None, context: Mapping[str, Any]) -> None:
    """Emit the span of a job that ended (:func:`emit_job_span`) with ``context``'s attributes and events (see
    :func:`run_context`); does nothing when tracing is off, and never raises."""
    if describe is None or tracer() is None:
        return
    try:
        attributes = {
            **job_attributes(describe, mode=str(context.get("mode")), region=context.get("region")),
            **dict(context.get("attributes") or {}),
        }
        events = job_events(
            describe,
            capacity_fallback=bool(context.get("capacity_fallback")),
            budget_stop=context.get("budget_stop"),
        )
        events += list(context.get("events") or [])
        emit_job_span(describe, attributes, events)
    except Exception as exc:  # a trace is a convenience: never the task's failure
        log.warning("Could not emit the trace of training job %s: %s", describe.get("TrainingJobName"), exc)


def run_context(task: RunSettings, run: TrainingRun, describe: Mapping[str, Any]) -> dict[str, Any]:
    """What the run adds to a job's span: the mode, the region, the capacity attempt, the right-sizing decision,
    the budget, and whether a capacity fallback or a budget stop followed the job."""
    from airflow_hetero.job.capacity_failure import failure_of_reason
    from airflow_hetero.operators.rightsizing_steps import decision_in_short

    attributes: dict[str, Any] = {}
    if run.chain is not None:
        attributes[f"{PREFIX}.capacity.attempt"] = run.chain.number
    if run.decision is not None:
        attributes[f"{PREFIX}.rightsizing"] = as_attribute(decision_in_short(run.decision))
    capped = task.max_cost is not None and describe.get("SecondaryStatus") == "MaxRuntimeExceeded"
    if task.max_cost is not None:
        attributes[f"{PREFIX}.budget.max_cost"] = float(task.max_cost)
        attributes[f"{PREFIX}.budget.currency"] = task.price_settings.currency
    return {
        "mode": ("queue" if task.batch_queue is not None else "direct") + ("_deferred" if task.deferrable else "_sync"),
        "region": run.hook.conn_region_name,
        "attributes": attributes,
        "capacity_fallback": run.chain is not None and failure_of_reason(describe.get("FailureReason")) is not None,
        "budget_stop": "SageMaker stopped the job at the runtime cap max_cost set" if capped else None,
    }


def trace_ended(task: RunSettings, run: TrainingRun) -> None:
    """Emit the span of the job the run saw end (``run.ended``), once; nothing when tracing is off."""
    describe, run.ended = run.ended, None
    if describe is None or tracer() is None:
        return
    try:
        context = run_context(task, run, describe)
    except Exception as exc:
        log.warning("Could not trace training job %s: %s", describe.get("TrainingJobName"), exc)
        return
    trace_job(describe, context)


def trace_queue_attempts(
    task: RunSettings, run: TrainingRun, service: Mapping[str, Any], known: Mapping[str, dict[str, Any]]
) -> None:
    """Emit a span for each attempt of a finished service job (``known``: the descriptions at hand; the others are
    described only when tracing is on), each but the last with a ``queue_requeue`` event; never raises."""
    if tracer() is None:
        return
    from airflow_hetero.job.phases import job_window
    from airflow_hetero.job.service_job import attempt_training_jobs

    try:
        names = attempt_training_jobs(dict(service))
        for number, name in enumerate(names, 1):
            describe = known.get(name) or run.hook.find_training_job(name)
            if describe is None:
                continue
            context = run_context(task, run, describe)
            context["attributes"].update(
                {"aws.batch.service_job.id": str(service.get("jobId")), f"{PREFIX}.queue.attempt": number}
            )
            if name in requeued(names):
                reason = str(describe.get("FailureReason") or describe.get("SecondaryStatus"))
                context["events"] = [Event("queue_requeue", job_window(describe, time.time())[1], {"reason": reason})]
            trace_job(describe, context)
    except Exception as exc:
        log.warning("Could not trace the attempts of service job %s: %s", service.get("jobName"), exc)


def summary_attributes(groups: Mapping[str, Mapping[str, Any]], verdict: Mapping[str, Any] | None) -> None:
    """Each group's busy %, cost and state, and the verdict, on the summary task's current span; never raises."""
    if tracer() is None:
        return
    try:
        from opentelemetry import trace

        span = trace.get_current_span()
        if not span.is_recording():
            return
        for name, values in groups.items():
            for key, value in values.items():
                if value is not None:
                    span.set_attribute(f"{PREFIX}.group.{name}.{key}", value)
        if verdict is not None:
            span.set_attribute(f"{PREFIX}.verdict.kind", str(verdict.get("kind")))
            if verdict.get("bottleneck"):
                span.set_attribute(f"{PREFIX}.verdict.bottleneck", str(verdict["bottleneck"]))
    except Exception as exc:
        log.warning("Could not add the summary to the task's span: %s", exc)


def as_attribute(value: Any) -> str:
    """A structured value (a decision, a list) as one attribute: compact JSON."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def requeued(names: Iterable[str]) -> list[str]:
    """A queued job's attempts but the last: each was requeued by Batch."""
    found = list(names)
    return found[:-1]
