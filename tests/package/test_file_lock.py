"""The tests' machine-wide locks wait within a deadline (tests/support/file_lock.py)."""

from __future__ import annotations

import fcntl
import time
from pathlib import Path

import pytest
from support.file_lock import held


def test_a_lock_held_elsewhere_fails_the_waiter_with_its_name(tmp_path: Path) -> None:
    path = tmp_path / "port.lock"
    with path.open("a") as other:  # another open file description: flock treats it as another holder
        fcntl.flock(other, fcntl.LOCK_EX)
        started = time.monotonic()
        with pytest.raises(TimeoutError, match=r"^the tests of fixed port 7100: .*port\.lock still locked"):
            with held(path, 0.3, "the tests of fixed port 7100"):
                pass
        assert time.monotonic() - started < 30  # gave up near its deadline, not never
        fcntl.flock(other, fcntl.LOCK_UN)
    with held(path, 0.3, "free now"):  # released: taken at once, and released again at the end
        with path.open("a") as probe:
            with pytest.raises(BlockingIOError):
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with path.open("a") as probe:
        fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
