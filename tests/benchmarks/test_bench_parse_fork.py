"""The fork-model parse benchmark runs Airflow's own parser on every variant (one tiny round)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_hetero._compat import AIRFLOW_V_3

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not AIRFLOW_V_3, reason="the benchmark drives Airflow 3's DAG processor")
def test_every_variant_parses_in_a_forked_child(tmp_path: Path) -> None:
    env = {**os.environ, "AIRFLOW_HETERO_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.parse_fork", "--rounds", "1"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    from benchmarks.parse_fork import VARIANTS

    rows = [line for line in out.splitlines() if "Operator" in line]
    assert [row.split("  ")[0] for row in rows] == list(VARIANTS), out  # the preloaded ones too
    assert all(float(row.split()[-2]) > 0 for row in rows), out  # each parse cost CPU (x baseline)
    provider = next(row for row in rows if row.startswith("Amazon"))
    assert float(provider.split()[-1]) == 0, out  # the distance column is measured from the provider
    assert (tmp_path / "cache").exists()  # the hetero variants' definition and request were validated once, then reused
