"""The triggerer benchmark runs both variants end to end against its stand-in endpoint (tiny N)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_both_variants_check_every_job_and_report_ratios() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.triggerer", "--jobs", "5", "--interval", "1", "--window", "2"],
        cwd=ROOT,
        env=dict(os.environ),
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    rows = {line[:36].strip(): line[36:].split() for line in out.splitlines()[2:]}
    ours, provider = (float(n) for n in rows["DescribeTrainingJob calls"][:2])
    assert 5 <= ours <= 10  # one Describe per job, then listing (and a refresh every 10 intervals)
    assert float(rows["ListTrainingJobs calls"][0]) >= 1
    assert provider >= 5 * 10  # the provider: one per job per poll, ~15 s at 1 s intervals
    assert rows["every job checked once after (s)"][0] != "nan", out
