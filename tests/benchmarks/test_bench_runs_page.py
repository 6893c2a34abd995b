"""The Runs view's benchmark: a few rounds of 30 runs stay within its CPU bound (benchmarks/runs_page.py)."""

from __future__ import annotations

import pytest

from benchmarks.runs_page import BOUND_SECONDS, benchmark, main


def test_thirty_runs_are_modelled_and_rendered_within_the_bound(capsys: pytest.CaptureFixture[str]) -> None:
    median = benchmark(rounds=3, count=30)
    assert median < BOUND_SECONDS, median
    assert "Runs view, 30 runs (model + render, CPU): median" in capsys.readouterr().out
    assert main(["--rounds", "1", "--runs", "3"]) == 0
