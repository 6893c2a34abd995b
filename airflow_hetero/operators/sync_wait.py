"""The synchronous wait for a training job: one DescribeTrainingJob per ``check_interval`` until the job ends.

:class:`SyncWait` runs when the task waits in the worker: every SecondaryStatus transition and the logs of every
host followed (:class:`JobFollower`, which queue mode's wait uses for each attempt too), transient errors ridden
out for ``transient_grace_seconds``, the limits of :mod:`airflow_hetero.job.limits` applied. Imported when the
task waits, never at DAG parse.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_hetero.hooks.training import HeteroTrainingHook
    from airflow_hetero.logs.tail import LogTailer
    from airflow_hetero.operators.run_state import TrainingRun
    from airflow_hetero.operators.task_settings import WaitSettings


def describe_if_visible(task: WaitSettings, run: TrainingRun, name: str) -> dict[str, Any] | None:
    """DescribeTrainingJob; None while the job this run just created is not visible yet."""
    from airflow_hetero.job.waiting import NOT_FOUND_YET, not_found_yet

    try:
        return run.hook.describe_training_job(name)
    except Exception as exc:
        if not not_found_yet(exc, run.submitted_at, task.not_found_grace_seconds):
            raise
        task.log.warning(NOT_FOUND_YET, name)
        return None


def describe_fresh(task: WaitSettings, run: TrainingRun, name: str) -> dict[str, Any]:
    """DescribeTrainingJob, waiting out "not found" within the grace period after this run's own create."""
    while (describe := describe_if_visible(task, run, name)) is None:
        time.sleep(min(task.check_interval, 5.0))
    return describe


def emit_log_tail(task: WaitSettings, hook: HeteroTrainingHook, name: str) -> None:
    """The end of every host's log, into the task log (a log that cannot be read only warns)."""
    log = task.log
    tailer = hook.log_tailer(name, emit=lambda line: log.info("%s", line))
    try:
        tailer.emit_tail()
    except Exception as exc:
        log.warning("Could not read the logs of %s: %s", name, exc)


class JobFollower:
    """What the task log has said of one training job: its SecondaryStatus transitions, once each, with their
    StatusMessage; its hosts' log lines with ``[group/host]`` prefixes (with ``print_log``)."""

    def __init__(self, task: WaitSettings, hook: HeteroTrainingHook, name: str) -> None:
        self.task, self.hook, self.name = task, hook, name
        self.logged = 0
        self.tailer: LogTailer | None = None

    def see(self, describe: dict[str, Any]) -> bool:
        """Log the transitions new in ``describe``; start following the logs. True when one was new (new log
        streams may have appeared)."""
        transitions = describe.get("SecondaryStatusTransitions") or []
        for item in transitions[self.logged :]:
            self.task.log.info(
                "Training job %s: %s - %s", self.name, item.get("Status"), item.get("StatusMessage") or ""
            )
        seen = max(self.logged, len(transitions))
        new, self.logged = seen > self.logged, seen
        if self.task.print_log and self.tailer is None:
            log = self.task.log
            self.tailer = self.hook.log_tailer(self.name, emit=lambda line: log.info("%s", line), describe=describe)
        return new

    def follow(self, *, final: bool, rescan: bool = False) -> None:
        """Print new log lines (all of them when ``final``); logs are a convenience, so an error only stops them."""
        if self.tailer is None:
            return
        try:
            if final:
                self.tailer.flush()
            else:
                self.tailer.poll(rescan=rescan)
        except Exception as exc:
            self.task.log.warning("Stopped following the logs of %s: %s", self.name, exc)
            self.tailer = None
            return
        if final:
            self.tailer = None


class SyncWait:
    """One synchronous wait of run ``run`` for job ``name``."""

    def __init__(self, task: WaitSettings, run: TrainingRun, name: str) -> None:
        self.task, self.run, self.name = task, run, name

    def describe_through_outage(self, failing_since: float | None) -> tuple[dict[str, Any] | None, float | None]:
        """One poll's describe (None: not visible yet, or a transient error) and the start of the
        current run of failed polls; transient errors raise once they outlast ``transient_grace_seconds``."""
        from airflow_hetero._retry import is_transient

        try:
            describe = describe_if_visible(self.task, self.run, self.name)
        except Exception as exc:
            if not is_transient(exc):
                raise
            failing_since = failing_since or time.monotonic()
            if time.monotonic() - failing_since > self.task.transient_grace_seconds:
                raise  # a long outage: fail; the retry re-attaches to the job
            self.task.log.warning("Training job %s: transient errors persist, will retry: %s", self.name, exc)
            return None, failing_since
        return describe, None if describe is not None else failing_since

    def until_done(self, describe: dict[str, Any] | None) -> dict[str, Any]:
        """Wait until the job ends; its result dict, or the task's error (a limit passed stops the job)."""
        from airflow_hetero.job.limits import passed_limit
        from airflow_hetero.job.outcome import classify, resolve_outcome

        task, run, name = self.task, self.run, self.name
        follower = JobFollower(task, run.hook, name)
        failing_since: float | None = None  # start of the current run of failed polls
        stopping_since: float | None = None  # first poll that saw Stopping
        while True:
            if describe is None:
                describe, failing_since = self.describe_through_outage(failing_since)
            state = None
            transition = False  # a new SecondaryStatus: new log streams may have appeared
            if describe is not None:
                transition = follower.see(describe)
                state = classify(describe)
            follower.follow(final=state not in (None, "running"), rescan=transition)
            if describe is not None and state != "running":
                run.active_job_name = None
                run.ended = describe  # its trace (operators/job_trace.py)
                return resolve_outcome(describe, fail_on_stopped=task.fail_on_stopped)
            if describe is not None and describe.get("TrainingJobStatus") == "Stopping":
                stopping_since = stopping_since or time.monotonic()
            passed = passed_limit(
                name,
                describe,
                waited=time.monotonic() - run.started,
                stopping_for=None if stopping_since is None else time.monotonic() - stopping_since,
                max_ingestion_time=task.max_ingestion_time,
                stopping_timeout=task.stopping_timeout_seconds,
            )
            if passed is not None:
                if passed.stop:
                    run.hook.stop_training_job(name)
                raise passed.error
            time.sleep(task.check_interval)
            describe = None
