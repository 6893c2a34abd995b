"""The queue triggerer benchmark runs both variants end to end (tiny N) and shows queue mode's call-count property:
one listing (one page) and one queue snapshot per interval for all the jobs, no describe per job."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from benchmarks import queue_triggerer

ROOT = Path(__file__).resolve().parents[2]
JOBS = 8


def bench(*args: str) -> tuple[list[str], dict[str, list[float]], str]:
    """Run the benchmark; its column titles, its rows (label -> numbers) and its whole output."""
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.queue_triggerer", *args],
        cwd=ROOT,
        env=dict(os.environ),
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    header, *lines = out.splitlines()[1:]
    rows = {line[:44].strip(): [float(v) if v != "-" else float("nan") for v in line[44:].split()] for line in lines}
    return header.split(), rows, out


def test_queue_mode_lists_once_per_interval_for_all_jobs_and_direct_mode_runs_beside_it() -> None:
    # the counts below are the steady window's (4 intervals); 8 jobs are started and listed well within a 3 s
    # settle (the benchmark's default floor of 10 s is meant for N in the hundreds)
    phases = ("--warm-up", "2", "--settle", "3")
    columns, rows, out = bench("--jobs", str(JOBS), "--interval", "1", "--window", "4", *phases)
    assert columns[:4] == ["queue", "mode", "direct", "mode"], out
    intervals = rows["intervals in the steady window"][0]
    assert intervals >= 3.5, out
    # one listing per interval whatever N (8 jobs fit one page), give or take one at the window's edges; a
    # watcher that listed per trigger cohort, or described every job, is far above these
    lists = rows["ListServiceJobs per interval"][0] * intervals
    snapshots = rows["GetJobQueueSnapshot per interval"][0] * intervals
    assert 1 <= round(lists) <= intervals + 1, out
    assert 1 <= round(snapshots) <= intervals + 1, out
    assert rows["DescribeServiceJob per interval"][0] == 0, out
    assert rows["ListServiceJobs per interval"][1] == 0 and rows["ListTrainingJobs per interval"][0] == 0, out
    assert rows["ListTrainingJobs per interval"][1] >= 1, out  # the direct variant watched its jobs
    assert rows["steady CPU per job per poll (ms)"][0] > 0 and len(rows["steady CPU per job per poll (ms)"]) == 3


def test_the_report_counts_calls_per_interval_and_ratios() -> None:
    result = {"polls": 2.0, "cpu_ms_per_poll": 1.0, "mb_per_trigger": 0.1, "lag_start_ms": 1.0, "lag_ms": 1.0,
              "peak_rss_mb": 100.0}  # fmt: skip
    queue = {**result, "calls:ListServiceJobs": 12.0, "calls:GetJobQueueSnapshot": 2.0}
    direct = {**result, "calls:ListTrainingJobs": 10.0, "calls:DescribeTrainingJob": 4.0, "cpu_ms_per_poll": 4.0}
    lines = queue_triggerer.report({"queue": queue, "direct": direct}, 500, 10.0)
    assert "one listing of 6 page(s) of 100" in lines[0]
    rows = {line[:44].strip(): line[44:].split() for line in lines[2:]}
    assert rows["ListServiceJobs per interval"] == ["6.00", "0.00", "-"]
    assert rows["API calls per interval, all"] == ["7.00", "7.00", "1.000"]
    assert rows["steady CPU per job per poll (ms)"] == ["1.000", "4.000", "0.250"]
