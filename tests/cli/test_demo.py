"""The example retraining DAG end to end under dag.test(), against the offline endpoint (make demo)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def run_demo(workdir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "AWS_"))}
    return subprocess.run(
        [sys.executable, "-m", "airflow_hetero.cli", "demo", "--workdir", str(workdir), *extra],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_demo_runs_the_example_dag_and_prints_the_group_table(tmp_path: Path) -> None:
    proc = run_demo(tmp_path / "demo")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "==> task states: gate=success, submit=success, summarize=success, wait=success, week=success" in out
    table = out.split("==> per-group summary", 1)[1]
    assert max(len(line) for line in table.split("\n==> ", 1)[0].splitlines()) <= 100
    rows: dict[str, list[list[str]]] = {}  # the stacked tables: logs per group, utilisation, then cost (new)
    for line in table.splitlines():
        if line.startswith(("data_group ", "train_group ", "total ")):
            rows.setdefault(line.split()[0], []).append(line.split())
    logs_rows = {name: found[0] for name, found in rows.items() if name != "total"}
    util_rows = {name: found[1] for name, found in rows.items() if name != "total"}
    cost_rows = {name: found[-1] for name, found in rows.items()}
    for group, price in (("data_group", "0.05"), ("train_group", "0.5")):  # the endpoint's stand-in prices
        assert cost_rows[group][2] == price and cost_rows[group][3] != "unknown", cost_rows[group]
    assert cost_rows["total"][2] != "unknown"
    assert "a stand-in price, not an AWS price" in " ".join(table.split("\n  "))
    assert logs_rows["data_group"][1:3] == ["ml.c5.xlarge", "2"]
    assert logs_rows["train_group"][1:3] == ["ml.g5.xlarge", "1"]
    for group in ("data_group", "train_group"):  # hosts live well under the 1 s metrics interval
        row = util_rows[group]
        assert "-" not in row[1:3] and row[3:] == ["-", "-"], row  # cpu, mem; gpu
    assert "local runs (the offline endpoint) have no GPUs" in " ".join(table.split("\n  "))  # wrapped note
    assert "train_group: train:loss last=" in table
    # the second DAG ran on the model asset the first one updated, and deployed that job's model
    assert "==> task states: deploy=success, evaluate=success" in out
    (job,) = re.findall(r"==> deployed s3://airflow-hetero-demo/deployed/model.tar.gz from (hetero-retrain-\w+)", out)
    assert f"Submitted training job {job}" in out + proc.stderr  # the job the first DAG ran
    # the offline endpoint publishes the job's final metrics, so the deploy DAG reads SageMaker's figure
    assert re.search(r"train:loss 0\.\d+ \(from the final metric\); groups: data_group, train_group", out)
    assert "==> demo succeeded" in out


def test_demo_fails_clearly_when_the_gate_rejects_the_model(tmp_path: Path) -> None:
    proc = run_demo(tmp_path / "demo", "--max-final-loss", "1e-12")
    assert proc.returncode == 1
    assert "gate=failed" in proc.stdout
    assert "model rejected: final train:loss" in proc.stdout + proc.stderr
    assert "demo: the hetero_retraining run ended failed. Look at the task logs above" in proc.stderr
    assert "running DAG hetero_model_deploy" not in proc.stdout  # a rejected model is not deployed
