"""The operator's synchronous wait: one DescribeTrainingJob per ``check_interval`` until the job ends.

:meth:`HeteroTrainingOperator.wait <airflow_hetero.operators.training.HeteroTrainingOperator.wait>` runs a
:class:`SyncWait` when the task waits in the worker: every SecondaryStatus transition logged once (the
operator's ``log_transitions``), the logs of every host followed (its ``make_tailer``), transient errors
ridden out for ``transient_grace_seconds``, the limits of :mod:`airflow_hetero.job.limits` applied. Imported
when the task waits, never at DAG parse.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from airflow_hetero.hooks.training import HeteroTrainingHook
    from airflow_hetero.logs.tail import LogTailer


class Waiter(Protocol):
    """What the wait reads of the operator (its settings and overridable steps)."""

    log: Any
    transient_grace_seconds: float
    stopping_timeout_seconds: float
    print_log: bool
    fail_on_stopped: bool
    max_ingestion_time: float | None
    check_interval: float
    active_job_name: str | None

    def describe_if_visible(self, hook: HeteroTrainingHook, name: str) -> dict[str, Any] | None: ...

    def log_transitions(self, name: str, describe: dict[str, Any], logged: int) -> int: ...

    def make_tailer(self, hook: HeteroTrainingHook, name: str, describe: dict[str, Any]) -> LogTailer: ...


class SyncWait:
    """One synchronous wait of the operator ``op`` for job ``name``, through ``hook``."""

    def __init__(self, op: Waiter, hook: HeteroTrainingHook, name: str) -> None:
        self.op = op
        self.hook = hook
        self.name = name

    def describe_through_outage(self, failing_since: float | None) -> tuple[dict[str, Any] | None, float | None]:
        """One poll's describe (None: not visible yet, or a transient error) and the start of the
        current run of failed polls; transient errors raise once they outlast ``transient_grace_seconds``."""
        from airflow_hetero._retry import is_transient

        try:
            describe = self.op.describe_if_visible(self.hook, self.name)
        except Exception as exc:
            if not is_transient(exc):
                raise
            failing_since = failing_since or time.monotonic()
            if time.monotonic() - failing_since > self.op.transient_grace_seconds:
                raise  # a long outage: fail; the retry re-attaches to the job
            self.op.log.warning("Training job %s: transient errors persist, will retry: %s", self.name, exc)
            return None, failing_since
        return describe, None if describe is not None else failing_since

    def run(self, describe: dict[str, Any] | None, started: float) -> dict[str, Any]:
        """Wait until the job ends; its result dict, or the task's error (a limit passed stops the job)."""
        from airflow_hetero.job.limits import passed_limit
        from airflow_hetero.job.outcome import classify, resolve_outcome

        op, hook, name = self.op, self.hook, self.name
        logged = 0  # SecondaryStatusTransitions already written to the task log
        tailer: LogTailer | None = None
        failing_since: float | None = None  # start of the current run of failed polls
        stopping_since: float | None = None  # first poll that saw Stopping
        while True:
            if describe is None:
                describe, failing_since = self.describe_through_outage(failing_since)
            state = None
            transition = False  # a new SecondaryStatus: new log streams may have appeared
            if describe is not None:
                seen = op.log_transitions(name, describe, logged)
                transition, logged = seen > logged, seen
                state = classify(describe)
                if op.print_log and tailer is None:
                    tailer = op.make_tailer(hook, name, describe)
            if tailer is not None:
                tailer = self.follow_logs(tailer, final=state not in (None, "running"), rescan=transition)
            if describe is not None and state != "running":
                op.active_job_name = None
                return resolve_outcome(describe, fail_on_stopped=op.fail_on_stopped)
            if describe is not None and describe.get("TrainingJobStatus") == "Stopping":
                stopping_since = stopping_since or time.monotonic()
            passed = passed_limit(
                name,
                describe,
                waited=time.monotonic() - started,
                stopping_for=None if stopping_since is None else time.monotonic() - stopping_since,
                max_ingestion_time=op.max_ingestion_time,
                stopping_timeout=op.stopping_timeout_seconds,
            )
            if passed is not None:
                if passed.stop:
                    hook.stop_training_job(name)
                raise passed.error
            time.sleep(op.check_interval)
            describe = None

    def follow_logs(self, tailer: LogTailer, *, final: bool, rescan: bool = False) -> LogTailer | None:
        """Print new log lines; logs are a convenience, so a persistent error only stops them."""
        try:
            if final:
                tailer.flush()
            else:
                tailer.poll(rescan=rescan)
        except Exception as exc:
            self.op.log.warning("Stopped following the logs of %s: %s", tailer.job_name, exc)
            return None
        return tailer
