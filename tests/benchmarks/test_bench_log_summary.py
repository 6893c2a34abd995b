"""The log-summary benchmark: its data layout, the call floor, and a tiny end-to-end run."""

from __future__ import annotations

import random

import pytest

from benchmarks.log_summary import LAYOUT, _lines, benchmark, minimum_calls


def test_minimum_calls_follow_the_page_limits() -> None:
    sizes = {f"s{i}": (125_000, 125_000 * 70) for i in range(8)}
    assert minimum_calls(sizes) == 1 + 8 * (13 + 1)
    assert minimum_calls({"big": (10, 3 * 1_048_576 - 260)}) == 1 + 3 + 1  # 1 MB pages bind first
    assert minimum_calls({"big": (10, 3 * 1_048_576)}) == 1 + 4 + 1
    assert minimum_calls({f"s{i}": (0, 0) for i in range(51)}) == 2 + 51


def test_generated_streams_carry_the_evidence_each_kind_of_host_prints() -> None:
    rng = random.Random(1)
    master = _lines("algo-1", "dnn_group", 100, rng)
    worker = _lines("algo-3", "dnn_group", 100, rng)
    marker_only = _lines("algo-6", "eval_group", 100, rng)
    assert any(line.startswith("SM_RESOURCE_CONFIG=") for line in master)
    assert not any(line.startswith("SM_") for line in worker)
    assert marker_only[0].startswith("[airflow-hetero] host=algo-6 group=eval_group")
    assert len(master) == len(worker) == 100
    assert sum(len(hosts) for _, hosts in LAYOUT.values()) == 8


@pytest.mark.slow
def test_tiny_benchmark_run(capsys: pytest.CaptureFixture[str]) -> None:
    result = benchmark(events=4_000, repeats=1, workers=[2, 1])
    out = capsys.readouterr().out
    assert "minimum (page limits)" in out and "provider" in out
    assert "bare one-thread page drain" in out and "max_workers=2: " in out and "max_workers=1: " in out
    assert "a drain with 2 threads" in out
    assert result["minimum_calls"] == 1 + 8 * 2
    readers = ("airflow-hetero", "airflow-hetero max_workers=1", "provider", "raw drain", "threaded drain (2 threads)")
    for name in readers:
        assert result[name]["events"] == 4_000
    assert result["airflow-hetero"]["threads"] == 2 and result["airflow-hetero"]["cpu_ratio"] > 0
    assert result["airflow-hetero"]["calls"] == result["minimum_calls"] + 1  # one re-listing
    assert result["provider"]["calls"] >= result["minimum_calls"]
