"""Text made safe for a terminal keeps its words apart and stays on one line."""

from __future__ import annotations

from airflow_hetero.logs.text import strip_control


def test_line_breaks_become_one_space() -> None:
    reason = "AlgorithmError: error lines:\nTraceback (most recent call last):\r\n  File x"
    assert strip_control(reason) == "AlgorithmError: error lines: Traceback (most recent call last):   File x"


def test_escapes_and_controls_go_tabs_stay() -> None:
    assert strip_control("\x1b[31mERROR\x1b[0m\tdisk \x07full\x00") == "ERROR\tdisk full"
