"""The tries of one task instance against the golden matrix's stand-in (:mod:`support.golden_recorder`), for tests
that kill a worker between tries, resume deferrals or not, and look at each try's requests.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from airflow_hetero._compat import TaskDeferred
from support.golden_recorder import Case, CaseRun, RecordingTI, installed, trigger_event


class Tries:
    """The tries of one task instance against one stand-in; each try's requests by operation. ``state_store``: the
    context's ``task_state_store``; ``around``: a context manager each step (execute, resume) runs inside (a task's
    span)."""

    def __init__(
        self,
        case: Case,
        monkeypatch: pytest.MonkeyPatch,
        *,
        state_store: Any = None,
        around: Callable[[str], contextlib.AbstractContextManager[Any]] | None = None,
    ) -> None:
        self.run = CaseRun(case, monkeypatch, state_store=state_store)
        self.ti = RecordingTI(case.run_id)
        self.around = around or (lambda _: contextlib.nullcontext())

    def execute(self, *, resume: bool = True) -> list[str]:
        """One try (a retry after the first): execute, and each resume unless ``resume`` is False (the worker is
        gone while the task is deferred); the operations it sent, in order."""
        if self.run.steps:
            self.ti.new_try()
        first = len(self.run.steps)
        op = self.run.operator()
        with self.around("execute"):
            deferred: TaskDeferred | None = self.run.step("execute", op, self.ti, op.execute)
        while resume and deferred is not None:
            event = trigger_event(self.run.aws, deferred.trigger)
            op = self.run.operator()
            kwargs = {**(deferred.kwargs or {}), "event": event}
            call = functools.partial(op.resume_execution, deferred.method_name, kwargs)
            with self.around("resume"):
                deferred = self.run.step("resume", op, self.ti, call)
        return [r["operation"] for s in self.run.steps[first:] for r in s.get("requests", [])]

    @property
    def last(self) -> dict[str, Any]:
        return dict(self.run.steps[-1]["outcome"])


def installing(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Tries], Tries]]:
    """A test's fixture body: install the stand-in of its :class:`Tries` (call it with one) until the test ends."""
    with contextlib.ExitStack() as stack:

        def install(t: Tries) -> Tries:
            t.run.recorder = stack.enter_context(installed(t.run.aws, monkeypatch))
            return t

        yield install
