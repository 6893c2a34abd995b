"""Scanning a page at once gives exactly what reading it line by line gives."""

from __future__ import annotations

import dataclasses
import random
import re
from typing import Any

import pytest

from airflow_hetero.logs.pagescan import candidate_lines, page_scannable, page_text
from airflow_hetero.logs.patterns import DEFAULT_ERROR_PATTERNS, EVIDENCE_LITERALS, LineRules
from airflow_hetero.logs.streams import StreamLog
from airflow_hetero.runtime import format_marker

METRICS = [
    {"Name": "train:loss", "Regex": r"loss=([0-9.]+)"},
    {"Name": "val:acc", "Regex": r"^acc ([0-9.]+)$"},  # anchored: per line, ^ and $ are the line's ends
    {"Name": "epoch", "Regex": r"epoch (\d+)"},
]


def _line(rng: random.Random, i: int) -> str:
    kinds = [
        lambda: f"step {i} processed batch in {rng.random():.3f} ms",
        lambda: f"step {i} loss={rng.random():.4f}",
        lambda: f"acc {rng.random():.3f}",
        lambda: f"xacc {rng.random():.3f}",  # not anchored at the start: no match
        lambda: f"ERROR step {i} failed",
        lambda: f"WARNING slow input {i}",
        lambda: "Traceback (most recent call last):",
        lambda: '  File "train.py", line 3, in <module>',
        lambda: "    main()",
        lambda: "RuntimeError: CUDA error: device-side assert",
        lambda: "During handling of the above exception, another exception occurred:",
        lambda: "SM_CURRENT_HOST=algo-2",
        lambda: "SM_CURRENT_INSTANCE_GROUP=data_group",
        lambda: 'SM_INSTANCE_GROUPS_DICT={"data_group":{"instance_group_name":"data_group","hosts":["algo-2"]}}',
        lambda: format_marker("algo-2", "data_group", "ml.c5.xlarge"),
        lambda: "",
        lambda: "   ",
        lambda: "x" * rng.choice([999, 1000, 1001, 5000]),
        lambda: f"multi\nline {i} ERROR inside",  # an embedded newline: the page goes line by line
        lambda: f"\x1b[31mERROR\x1b[0m coloured {i}",  # ANSI: line by line
        lambda: "Killed",
        lambda: f"epoch {i} done",
        lambda: f"ERROR-free WARN-less text {i}",
        lambda: "NCCL error: unhandled system error",
        lambda: "ERROR",  # at the very end of a line
        lambda: f"step {i} FAILED",
        lambda: f"WARNING epoch {i} loss={rng.random():.3f}",  # a warning and two metrics
        lambda: f"SM_LOSS=loss={rng.random():.3f}",  # evidence, never a metric
        lambda: f"x SM_CURRENT_HOST=algo-9 {i}",  # not at the start: no evidence, an ordinary line
    ]
    return rng.choice(kinds)()


def _state(log: StreamLog) -> dict[str, Any]:
    data = dataclasses.asdict(log)
    data.pop("rules")
    data["tail"] = list(log.tail)
    data["_in_traceback"] = None if log._in_traceback is None else dataclasses.asdict(log._in_traceback)
    return data


#: A capturing group keeps the error patterns out of the one-pass page pattern (literals found apart).
APART = [*DEFAULT_ERROR_PATTERNS, r"(FAIL)ED"]


@pytest.mark.parametrize("seed", range(40))
def test_page_scan_equals_line_by_line(seed: int) -> None:
    rng = random.Random(seed)
    rules = LineRules.build(error_patterns=APART if seed % 4 == 3 else None, metric_definitions=METRICS)
    assert rules.page_patterns is not None
    assert (rules.page_literals == ()) == (seed % 4 != 3)
    fast = StreamLog("s", "algo-2", rules, tail_lines=rng.choice([0, 1, 5, 20]), max_error_samples=rng.choice([0, 3]))
    slow = StreamLog("s", "algo-2", rules, tail_lines=fast.tail_lines, max_error_samples=fast.max_error_samples)
    plain = rng.random() < 0.5  # half of the runs without the line kinds that force the slow path
    t = 1_700_000_000_000
    for _ in range(rng.randint(1, 6)):
        page = []
        for i in range(rng.randint(1, 300)):
            line = _line(rng, i)
            while plain and ("\n" in line or "\x1b" in line):
                line = _line(rng, i)
            t += rng.choice([0, 1, 5, -3])  # out-of-order timestamps too
            page.append({"timestamp": t, "message": line})
        fast.add_events(page)
        for event in page:
            slow.add(event["timestamp"], event["message"])
    assert _state(fast) == _state(slow)


def test_pages_scan_at_once_only_when_every_rule_is_line_local() -> None:
    assert LineRules.build().page_patterns is not None
    assert LineRules.build(error_patterns=[r"\AERROR"]).page_patterns is None  # \A means the page's start
    assert LineRules.build(error_patterns=[r"ERROR(?!\s)"]).page_patterns is None  # "\n" is \s in a page
    assert LineRules.build(error_patterns=["fatal", "(?i)error"]).page_patterns is None  # not joinable
    assert LineRules.build(metric_definitions=[{"Name": "m", "Regex": r"(?s)m=(.+)"}]).page_patterns is None
    assert page_scannable(r"ERROR(?!\s)", reviewed=[r"ERROR(?!\s)"])


def test_errors_warnings_and_evidence_share_one_page_pass_when_joining_changes_nothing() -> None:
    assert LineRules.build().page_literals == ()
    for unjoinable in ([r"(x)\1"], [r"(?P<n>x)"], [r"(?x) ERROR"]):  # groups renumbered, flags for all
        rules = LineRules.build(error_patterns=unjoinable)
        assert rules.page_patterns is not None and rules.page_literals == EVIDENCE_LITERALS, unjoinable
    rules = LineRules.build(error_patterns=["fatal"], warning_patterns=["(?i)warn"])
    assert rules.page_patterns is not None and rules.page_literals == EVIDENCE_LITERALS


def test_a_match_across_lines_does_not_hide_the_next_lines_own_match() -> None:
    messages = ["alpha", "beta x", "x gamma"]
    text = page_text(messages) or ""
    crossing = re.compile(r"a\s+b|x")  # matches "a\nb" across lines 0-1, and "x" in lines 1 and 2
    assert candidate_lines(text, [crossing]) == [(0, 1), (1, 1), (2, 1)]
    assert candidate_lines(text, [], ["ta", "gam"]) == [(1, 1), (2, 2)]
    which = candidate_lines(text, [re.compile("a$", re.MULTILINE), re.compile("x")], ["gam"])
    assert which == [(0, 0b001), (1, 0b010), (2, 0b111)]  # bit per pattern, then per literal


@pytest.mark.parametrize("message", ["a\rb", "a\x0bb", "a\x1cb", "a\u2028b", "a\x85b", "\x1b[0m", "a\nb"])
def test_messages_that_are_not_one_simple_line_go_line_by_line(message: str) -> None:
    assert page_text(["ok", message]) is None
