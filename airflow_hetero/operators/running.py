"""How a training task runs: render and load its definition, submit or re-attach, wait or defer, resume.

Functions of the operator (:class:`~airflow_hetero.operators.task.TrainingTask`), behind the
:class:`~airflow_hetero.operators.training.HeteroTrainingOperator` methods of the same names, which
import this module on first use: parsing a DAG file never loads it, nor anything it imports.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_hetero._compat import AirflowFailException
from airflow_hetero.operators.lifecycle import past_job_limit

if TYPE_CHECKING:
    import jinja2

    from airflow_hetero._compat import Context
    from airflow_hetero.definition.job import HeteroTrainingJob
    from airflow_hetero.hooks.training import HeteroTrainingHook
    from airflow_hetero.job.identity import TaskIdentity
    from airflow_hetero.logs.tail import LogTailer
    from airflow_hetero.operators.task import TrainingTask


def render_definition_file(
    op: TrainingTask, path: str, context: Context, jinja_env: jinja2.Environment | None = None
) -> dict[str, Any]:
    """Read a YAML/JSON definition (relative to the DAG folder) and render Jinja in every string."""
    from airflow_hetero.definition.errors import JobDefinitionError
    from airflow_hetero.definition.job import read_definition_file

    file = Path(path)
    try:
        data = read_definition_file(file if file.is_absolute() else op.base_dir() / file)
    except JobDefinitionError as err:
        raise AirflowFailException(f"Task {op.task_id}: {err}") from err
    rendered: dict[str, Any] = op.render_template(data, context, jinja_env)
    return rendered


def load_definition(op: TrainingTask, context: Context) -> HeteroTrainingJob:
    """The rendered definition, validated; definition errors fail without retries."""
    from airflow_hetero.definition.errors import JobDefinitionError
    from airflow_hetero.definition.job import load_job

    source = op.job
    if isinstance(source, str):  # not rendered yet (execute() called directly)
        source = op.render_definition_file(source, context)
    try:
        return load_job(source)
    except JobDefinitionError as err:
        raise AirflowFailException(f"Task {op.task_id}: {err}") from err


def candidate_names(op: TrainingTask, job: HeteroTrainingJob, context: Context) -> Iterator[str]:
    """Job names this task instance may use, in order: first try, then fresh suffixes."""
    from airflow_hetero.definition import naming
    from airflow_hetero.definition.request import base_job_name

    if op.job_name:
        # the longest name this task may use must be valid before the first job is sent
        for name in (op.job_name, f"{op.job_name}-{naming.MAX_ATTEMPT}"):
            problem = naming.check_job_name(name)
            if problem:
                raise AirflowFailException(f"job_name: {problem} (retries append up to -{naming.MAX_ATTEMPT})")
        for attempt in range(naming.MAX_ATTEMPT + 1):
            yield op.job_name if attempt == 0 else f"{op.job_name}-{attempt}"
        return
    ti: Any = context["ti"]
    base = base_job_name(job)
    key = naming.task_key(base, ti.dag_id, ti.task_id, ti.run_id, ti.map_index)
    for attempt in range(naming.MAX_ATTEMPT + 1):
        yield naming.derived_job_name(base, key, attempt)


def submit(
    op: TrainingTask,
    hook: HeteroTrainingHook,
    job: HeteroTrainingJob,
    *,
    name: str,
    region: str,
    identity: TaskIdentity,
) -> None:
    """Package and upload a local source_dir, then send the one CreateTrainingJob (identity stamped)."""
    from airflow_hetero.definition.errors import JobDefinitionError
    from airflow_hetero.definition.request import build_training_request
    from airflow_hetero.definition.source import (
        SourceDirError,
        package_source_dir,
        source_upload_uri,
        upload_extra_args,
    )
    from airflow_hetero.job.outcome import wait_limit_seconds
    from airflow_hetero.job.resource_config import describe_groups, instance_groups, is_hetero

    try:
        request = identity.stamp(build_training_request(job, job_name=name, region=region))
        upload_uri = source_upload_uri(job, name)
        code = package_source_dir(job, base=op.base_dir()) if upload_uri else None
    except (JobDefinitionError, SourceDirError, ValueError) as err:
        raise AirflowFailException(f"Task {op.task_id}: {err}") from err
    if upload_uri and code is not None:
        hook.upload_bytes(code, upload_uri, upload_extra_args(job))
        op.log.info("Uploaded training code (%d bytes) to %s", len(code), upload_uri)
    op.log.info("CreateTrainingJob request for %s:\n%s", name, json.dumps(request, indent=2, default=str))
    op.active_job_name = name
    op.submitted_at = time.time()
    answer = hook.create_training_job(request, identity=identity.digest)
    op.wait_limit = wait_limit_seconds(request)
    groups = describe_groups(instance_groups(request)) if is_hetero(request) else ""
    how = "Adopted (the create's answer was lost)" if answer.get("Adopted") else "Submitted"
    op.log.info("%s training job %s (%s) %s", how, name, answer.get("TrainingJobArn"), groups)


def execute(op: TrainingTask, context: Context) -> dict[str, Any]:
    """Submit or re-attach, then wait (or defer) and return the result dict."""
    from airflow_hetero.job.outcome import classify, resolve_outcome, result_dict, wait_limit_seconds
    from airflow_hetero.links.training import persist_job_links

    started = time.monotonic()
    started_at = time.time()
    job = op.load_definition(context)
    hook = op.make_hook()
    region = hook.conn_region_name
    name, describe = op.start_job(hook, job, context, region)
    op.active_job_name = name
    if describe is not None:
        op.wait_limit = wait_limit_seconds(describe)
    persist_job_links(context, job_name=name, region=region)
    if describe is not None and classify(describe) == "succeeded":
        op.log.info("Training job %s already completed: returning its result", name)
        return resolve_outcome(describe, fail_on_stopped=op.fail_on_stopped)
    if not op.wait_for_completion:
        return result_dict(describe or op.describe_fresh(hook, name))
    if op.deferrable:
        op.defer_wait(name, started_at)
    return op.wait(hook, name, describe, started)


def defer_wait(op: TrainingTask, name: str, started_at: float | None = None) -> None:
    """Hand the wait to the triggerer (deadlines counted from the task's start, see deferral_deadline)."""
    from datetime import timedelta

    from airflow_hetero.triggers.training import HeteroTrainingTrigger

    started_at = time.time() if started_at is None else started_at
    deadline, reason, airflow_timeout = op.deferral_deadline(started_at)
    op.defer(
        trigger=HeteroTrainingTrigger(
            name,
            aws_conn_id=op.aws_conn_id,
            region_name=op.region_name,
            verify=op.verify,
            botocore_config=op.botocore_config,
            poll_interval=float(op.check_interval),
            deadline=deadline,
            stop_on_kill=True,
            started_at=started_at,
            created_at=op.submitted_at,
            deadline_reason=reason,
        ),
        method_name="execute_complete",
        timeout=None if airflow_timeout is None else timedelta(seconds=airflow_timeout),
    )


def wait(
    op: TrainingTask, hook: HeteroTrainingHook, name: str, describe: dict[str, Any] | None, started: float
) -> dict[str, Any]:
    """Synchronous wait: one DescribeTrainingJob per check_interval until the job finishes."""
    from airflow_hetero._retry import is_not_found, is_transient
    from airflow_hetero.job.outcome import TrainingJobTimeoutError, classify, resolve_outcome, wait_limit_seconds

    logged = 0  # SecondaryStatusTransitions already written to the task log
    tailer: LogTailer | None = None
    failing_since: float | None = None  # start of the current run of failed polls
    stopping_since: float | None = None  # first poll that saw Stopping
    while True:
        if describe is None:
            try:
                describe = hook.describe_training_job(name)
                failing_since = None
            except Exception as exc:
                if is_not_found(exc) and op.just_created():
                    op.log.warning("Training job %s not found yet (just created): will look again", name)
                elif not is_transient(exc):
                    raise
                else:
                    failing_since = failing_since or time.monotonic()
                    if time.monotonic() - failing_since > op.transient_grace_seconds:
                        raise  # a long outage: fail; the retry re-attaches to the job
                    op.log.warning("Training job %s: transient errors persist, will retry: %s", name, exc)
        state = None
        transition = False  # a new SecondaryStatus: new log streams may have appeared
        if describe is not None:
            seen = op.log_transitions(name, describe, logged)
            transition, logged = seen > logged, seen
            state = classify(describe)
            if op.print_log and tailer is None:
                tailer = op.make_tailer(hook, name, describe)
        if tailer is not None:
            tailer = op.follow_logs(tailer, final=state not in (None, "running"), rescan=transition)
        if describe is not None and state != "running":
            op.active_job_name = None
            return resolve_outcome(describe, fail_on_stopped=op.fail_on_stopped)
        status = str((describe or {}).get("TrainingJobStatus"))
        if describe is not None and status == "Stopping":
            stopping_since = stopping_since or time.monotonic()
            if time.monotonic() - stopping_since > op.stopping_timeout_seconds:
                raise TrainingJobTimeoutError(
                    f"Training job {name} is still Stopping after {op.stopping_timeout_seconds:g}s "
                    "(stopping_timeout_seconds)",
                    job_name=name,
                    status=status,
                )
        elif op.max_ingestion_time is not None and time.monotonic() - started > op.max_ingestion_time:
            hook.stop_training_job(name)
            raise TrainingJobTimeoutError(
                f"Training job {name} exceeded max_ingestion_time ({op.max_ingestion_time}s); it was asked to stop",
                job_name=name,
                status=status,
            )
        elif describe is not None and past_job_limit(describe):
            limit = wait_limit_seconds(describe)
            hook.stop_training_job(name)
            raise TrainingJobTimeoutError(
                f"Training job {name} still {status} {limit}s after its creation, beyond its MaxRuntime "
                "(+ MaxWait) plus margin; it was asked to stop",
                job_name=name,
                status=status,
            )
        time.sleep(op.check_interval)
        describe = None


def log_transitions(op: TrainingTask, name: str, describe: dict[str, Any], logged: int) -> int:
    """Write each new SecondaryStatus transition once, with its StatusMessage."""
    transitions = describe.get("SecondaryStatusTransitions") or []
    for item in transitions[logged:]:
        op.log.info("Training job %s: %s - %s", name, item.get("Status"), item.get("StatusMessage") or "")
    return max(logged, len(transitions))


def make_tailer(op: TrainingTask, hook: HeteroTrainingHook, name: str, describe: dict[str, Any]) -> LogTailer:
    """A log follower for every host of the job, prefixing lines with ``[group/host]``."""
    from airflow_hetero.job.resource_config import total_instances
    from airflow_hetero.logs.tail import LogsGroupResolver, LogTailer

    return LogTailer(
        hook.logs_client,
        name,
        emit=lambda line: op.log.info("%s", line),
        resolver=LogsGroupResolver(describe),
        expected_hosts=total_instances(describe),
        retry_policy=hook.retry_policy,
    )


def follow_logs(op: TrainingTask, tailer: LogTailer, *, final: bool, rescan: bool = False) -> LogTailer | None:
    """Print new log lines; logs are a convenience, so a persistent error only stops them."""
    try:
        if final:
            tailer.flush()
        else:
            tailer.poll(rescan=rescan)
    except Exception as exc:
        op.log.warning("Stopped following the logs of %s: %s", tailer.job_name, exc)
        return None
    return tailer


def execute_complete(op: TrainingTask, context: Context, event: dict[str, Any]) -> dict[str, Any]:
    """Resume after deferral: same outcome rules and XCom as the synchronous wait."""
    from airflow_hetero.job.outcome import outcome_from_event

    op.active_job_name = str(event.get("job_name"))
    hook = op.make_hook()
    if op.print_log and event.get("status") == "done":
        from airflow_hetero.logs.tail import LogsGroupResolver, LogTailer

        tailer = LogTailer(
            hook.logs_client,
            op.active_job_name,
            emit=lambda line: op.log.info("%s", line),
            resolver=LogsGroupResolver(),
        )
        try:
            tailer.emit_tail()
        except Exception as exc:
            op.log.warning("Could not read the logs of %s: %s", op.active_job_name, exc)
    if event.get("deadline_reason"):
        timeout_message = f"reached its deadline: {event['deadline_reason']}"
    elif op.max_ingestion_time is not None:
        timeout_message = f"exceeded max_ingestion_time ({op.max_ingestion_time}s)"
    else:
        timeout_message = "did not finish within its MaxRuntime (+ MaxWait) plus margin"
    result = outcome_from_event(
        event,
        describe=hook.describe_training_job,
        stop=hook.stop_training_job,
        fail_on_stopped=op.fail_on_stopped,
        timeout_message=timeout_message,
    )
    op.active_job_name = None
    return result
