"""Ctrl-C of ``local serve`` ends it wherever in its wait loop the signal lands.

The deterministic test runs ``serve_command`` (its endpoint a stand-in, so each round is quick) in a
child process, round after round, and delivers SIGINT from a profile hook at the k-th return from a C
function of the main thread inside the loop: k = 1, 2, ... covers every such point, among them the
moment right after the loop's wait took a lock. The handler of the code this replaced
(``lambda *_: done.set()`` around ``done.wait(0.1)``) deadlocked there every time, not by chance;
the child's own watchdog then prints every thread's stack and exits, and this test fails saying where.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator

import pytest

from airflow_hetero.local.stop_signals import StopSignals

#: Points of the loop the sweep delivers the signal at (a round of the old loop had about 20).
POINTS = 80
#: The child's watchdog: a round that has not ended by then hung (a round takes well under a second).
HANG_AFTER = 30
#: This test's own deadline on the child, past its watchdog.
CHILD_DEADLINE = HANG_AFTER + 60

CHILD = textwrap.dedent(
    """
    import argparse, faulthandler, io, signal, sys, threading
    from airflow_hetero.local import cli

    class Endpoint:
        service = None
        def start(self):
            state["in_loop"] = True
        def stop(self):
            state["in_loop"] = False

    cli._endpoint = lambda args: Endpoint()
    cli.missing_local_extra = lambda: None
    cli.report_recovery = lambda service, out: None
    cli.describe_endpoint = lambda endpoint, out: None
    cli.WAKE_UP = 0.001  # many looks per second: the sweep reaches its later points quickly
    LOCKS = {{type(threading.Lock()), type(threading.RLock())}}
    state = {{"in_loop": False, "returns": 0, "at": 0, "sent": False, "locked": 0}}

    def hook(frame, event, arg):
        if not state["in_loop"] or event != "c_return" or state["sent"]:
            return
        owner = getattr(arg, "__self__", None)
        if type(owner) in LOCKS and getattr(arg, "__name__", "") in ("acquire", "__enter__"):
            state["locked"] += 1  # the main thread now holds a lock
        state["returns"] += 1
        if state["returns"] == state["at"]:
            state["sent"] = True
            signal.raise_signal(signal.SIGINT)  # runs the handler here, before this C return's caller goes on

    args = argparse.Namespace(host="127.0.0.1")
    for at in range(1, {points} + 1):
        state.update(returns=0, at=at, sent=False)
        print(f"round {{at}}", flush=True)
        faulthandler.dump_traceback_later({hang_after}, exit=True)  # a hang: every thread's stack, exit 1
        sys.setprofile(hook)
        try:
            code = cli.serve_command(args, out=io.StringIO())
        finally:
            sys.setprofile(None)
            faulthandler.cancel_dump_traceback_later()
        assert code == 0, code
        assert state["sent"], f"the loop ended before the signal at C return #{{at}}"
    print(f"ALL OK, delivered with a lock just taken {{state['locked']}} time(s)", flush=True)
    """
)


def test_ctrl_c_at_every_point_of_the_wait_loop_ends_serve() -> None:
    script = CHILD.format(hang_after=HANG_AFTER, points=POINTS)
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=CHILD_DEADLINE, check=False
        )
    except subprocess.TimeoutExpired as hung:
        pytest.fail(f"serve_command neither stopped nor was ended by its watchdog: {hung.stdout!r}")
    rounds = [line for line in done.stdout.splitlines() if line.startswith("round ")]
    assert done.returncode == 0, (
        f"serve_command hung at {rounds[-1] if rounds else 'its start'} (SIGINT at that C return of its loop); "
        f"stacks:\n{done.stderr}"
    )
    assert "ALL OK" in done.stdout, done.stdout
    assert len(rounds) == POINTS


@pytest.fixture
def stop_signals() -> Iterator[StopSignals]:
    with StopSignals((signal.SIGUSR1, signal.SIGUSR2)) as stop:
        yield stop


def test_handler_only_notes_the_first_signal(stop_signals: StopSignals) -> None:
    stop_signals.handle(signal.SIGUSR2)
    stop_signals.handle(signal.SIGUSR1)
    assert stop_signals.received == signal.SIGUSR2
    assert stop_signals.wait(0) == signal.SIGUSR2


def test_wait_times_out_without_a_signal(stop_signals: StopSignals) -> None:
    started = time.monotonic()
    assert stop_signals.wait(0.05) is None
    assert time.monotonic() - started >= 0.04


def test_signal_from_another_thread_wakes_the_wait_at_once(stop_signals: StopSignals) -> None:
    """The wake-up socket ends the select when the signal arrives, not after the timeout."""
    sender = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGUSR1))
    sender.start()
    started = time.monotonic()
    try:
        got = stop_signals.wait(600)
        if got is None:  # the byte woke the select before the handler ran: the next look has it
            got = stop_signals.wait(5)
    finally:
        sender.join(30)
    assert got == signal.SIGUSR1
    assert time.monotonic() - started < 60  # far below the 600 s timeout, with room for a loaded machine


def test_previous_handlers_and_wakeup_fd_come_back() -> None:
    def mine(signum: int, frame: object) -> None:
        pass

    before = signal.signal(signal.SIGUSR1, mine)
    fd_before = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(fd_before)
    try:
        with StopSignals((signal.SIGUSR1,)) as stop:
            assert signal.getsignal(signal.SIGUSR1) == stop.handle
        assert signal.getsignal(signal.SIGUSR1) is mine
        assert signal.set_wakeup_fd(fd_before) == fd_before  # the earlier wake-up fd is back
    finally:
        signal.signal(signal.SIGUSR1, before)
