"""The triggerer benchmark runs its variants end to end against its stand-in endpoint (tiny N)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def bench(*args: str) -> tuple[list[str], dict[str, list[str]], str]:
    """Run the benchmark; its column titles, its rows (label -> values) and its whole output."""
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.triggerer", *args],
        cwd=ROOT,
        env=dict(os.environ),
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    header, *lines = out.splitlines()[1:]
    return header.split(), {line[:40].strip(): line[40:].split() for line in lines}, out


def test_both_variants_check_every_job_and_report_ratios() -> None:
    columns, rows, out = bench("--jobs", "5", "--interval", "1", "--window", "2")
    assert columns[:2] == ["provider", "airflow-hetero"], out
    provider, ours = (float(n) for n in rows["DescribeTrainingJob calls"][:2])
    assert 5 <= ours <= 10  # one Describe per job, then listing (and a refresh every 10 intervals)
    assert float(rows["ListTrainingJobs calls"][1]) >= 1
    assert provider >= 5 * 10  # the provider: one per job per poll, ~15 s at 1 s intervals
    assert rows["every job checked once after (s)"][1] != "nan", out
    assert float(rows["full collection, Airflow alone (ms)"][1]) > 0
    lag, not_gc = float(rows["worst loop lag, steady (ms)"][1]), float(rows["not counting GC pauses, steady"][1])
    assert 0 <= not_gc <= lag


def test_the_frozen_gc_variant_runs_with_airflow_local_settings() -> None:
    columns, rows, out = bench("--jobs", "3", "--interval", "1", "--window", "1", "--only", "ours-frozen")
    assert columns == ["+", "gc.freeze()"], out
    assert rows["jobs checked at least once"] == ["3"], out
