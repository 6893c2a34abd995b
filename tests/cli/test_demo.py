"""The example retraining DAG end to end under dag.test(), against the offline endpoint (make demo):
from the installed wheel, what the terminal shows by default, with --verbose, and on failure; and
``airflow-hetero runs`` over the demo's run, from its metadata DB (the Runs view's data of a real run of
the example DAG on both Airflow versions; the system test draws the page of three on Airflow 3)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.installed import ROOT, built_wheel, run_without_modules, scratch_venv

from airflow_hetero.amounts import format_amount
from airflow_hetero.demo import NO_CAPACITY_TYPE

#: the example job's hosts listen on port 7100 of their loopback addresses
pytestmark = pytest.mark.fixed_ports(7100)

#: The most lines the default output may take (44 seen: steps, table, capacity line, verdict, deploy).
SHORT = 50
#: Lines of Airflow's own log, which the default output leaves in WORKDIR/airflow.log.
AIRFLOW_CHATTER = ("[DAG TEST]", "Task instance state updated", "Filling up the DagBag")
#: How long a fresh interpreter of the scratch venv may take to say where the DAGs are.
PYTHON_TIMEOUT = 120


def run_demo(
    workdir: Path, *extra: str, command: tuple[str, ...] | None = None, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "AWS_", "PYTHONPATH"))}
    if command is None:  # the checkout's code (the worktree's, when the tests run with PYTHONPATH)
        command = (sys.executable, "-m", "airflow_hetero.cli")
        env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [*command, "demo", "--workdir", str(workdir), *extra],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def assert_short_and_quiet(out: str) -> None:
    assert len(out.splitlines()) <= SHORT, out
    assert not [line for line in out.splitlines() if any(chatter in line for chatter in AIRFLOW_CHATTER)]


@pytest.mark.slow
def test_the_installed_demo_runs_the_example_dags_and_prints_steps_summary_and_verdict(tmp_path: Path) -> None:
    """From the wheel installed in a venv, run outside any clone: the DAGs the package ships."""
    python = scratch_venv(tmp_path / "venv", built_wheel())
    where = subprocess.run(
        [str(python), "-c", "import airflow_hetero.example_dags as e; print(e.folder())"],
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        capture_output=True,
        text=True,
        check=True,
        timeout=PYTHON_TIMEOUT,
    ).stdout.strip()
    assert where.startswith(str(tmp_path / "venv")) and "site-packages" in where, where
    workdir = tmp_path / "demo"
    proc = run_demo(workdir, command=(str(python.parent / "airflow-hetero"),), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert_short_and_quiet(out)
    assert f"    Airflow's own log goes to {workdir / 'airflow.log'} (--verbose prints it here)" in out
    assert f"\n    the DAGs: {where}\n" in out  # the example DAGs of the installed package
    log = (workdir / "airflow.log").read_text()
    assert out.startswith(f"==> starting the offline SageMaker endpoint, no {NO_CAPACITY_TYPE} capacity (workdir ")
    assert "==> task states: gate=success, summarize=success, train=success, week=success" in out
    table = out.split("==> per-group summary", 1)[1].split("\n==> ", 1)[0]
    assert max(len(line) for line in table.splitlines()) <= 100
    rows: dict[str, list[list[str]]] = {}  # the stacked tables: logs per group, utilisation, then cost
    for line in table.splitlines():
        if line.startswith(("data_group ", "train_group ", "total ")):
            rows.setdefault(line.split()[0], []).append(line.split())
    logs_rows = {name: found[0] for name, found in rows.items() if name != "total"}
    util_rows = {name: found[1] for name, found in rows.items() if name != "total"}
    cost_rows = {name: found[-1] for name, found in rows.items()}
    for group, price in (("data_group", "0.05"), ("train_group", "1")):  # the endpoint's stand-in prices
        assert cost_rows[group][2] == price and cost_rows[group][3] != "unknown", cost_rows[group]
    assert cost_rows["total"][2] != "unknown"
    assert "a stand-in price, not an AWS price" in " ".join(table.split("\n  "))
    assert logs_rows["data_group"][1:3] == ["ml.c5.xlarge", "2"]
    assert logs_rows["train_group"][1:3] == ["ml.g5.2xlarge", "1"]  # the fallback: no ml.g5.xlarge capacity
    capacity = (
        f"\nCapacity: train_group fell back {NO_CAPACITY_TYPE} -> ml.g5.2xlarge (1 attempt failed: CapacityError)\n"
    )
    assert capacity in table  # the failed attempt is not priced: it costs nothing
    assert f"price of {NO_CAPACITY_TYPE}:" not in table and f"per {NO_CAPACITY_TYPE} " not in " ".join(table.split())
    for group in ("data_group", "train_group"):  # hosts live well under the 1 s metrics interval
        row = util_rows[group]
        assert "-" not in row[1:3] and row[3:] == ["-", "-"], row  # cpu, mem; gpu
    assert "local runs (the offline endpoint) have no GPUs" in " ".join(table.split("\n  "))  # wrapped note
    assert "train_group: train:loss last=" in table
    verdict = table.split("\nVerdict: ", 1)[1]
    assert re.search(r"^  data_group: CPUs [\d.]+% busy", verdict, re.MULTILINE), verdict
    # the second DAG ran on the model asset the first one updated, and deployed that job's model
    assert "==> task states: deploy=success, evaluate=success" in out
    deployed = r"==> deployed s3://airflow-hetero-demo/deployed/model.tar.gz from (hetero-retrain-[\w-]+)"
    (job,) = re.findall(deployed, out)
    assert f"Submitted training job {job}" in log  # the job the first DAG ran, in Airflow's log
    assert job.endswith("-1") and f"Submitted training job {job[:-2]} " in log  # after the one that failed
    # the offline endpoint publishes the job's final metrics, so the deploy DAG reads SageMaker's figure
    assert re.search(r"train:loss 0\.\d+ \(from the final metric\); groups: data_group, train_group", out)
    assert re.search(r"\n==> demo succeeded in \d+ s\n$", out)
    assert proc.stderr == ""
    # the Runs view's data over the demo's run, from its metadata DB, as a user reads it: what the summary printed
    page = tmp_path / "runs.html"
    history = runs_of_the_demo(python.parent / "airflow-hetero", workdir, tmp_path, page)
    (row,) = history["runs"]
    cluster = {name: (int(found[2]), found[1]) for name, found in logs_rows.items()}
    assert row["job"] == job and {g["name"]: (g["count"], g["type"]) for g in row["groups"]} == cluster
    assert [format_amount(g["cost"]) for g in row["groups"]] == [cost_rows[g["name"]][3] for g in row["groups"]]
    ran = ", ".join(f"{name}={count} x {kind}" for name, (count, kind) in cluster.items())
    said = capacity.strip().removeprefix("Capacity: ")
    assert row["markers"] == [{"kind": "capacity", "text": f"capacity fallback: {said}; ran {ran}"}]
    total = cost_rows["total"][2]  # total, instance-s, cost (no price)
    assert history["headline"] == f"last 1 run: cost {total} USD per run (median); 1 capacity fallback"
    the_page_draws_the_run(page, history, tmp_path)


def the_page_draws_the_run(page: Path, history: dict[str, Any], tmp_path: Path) -> None:
    """The page ``runs --html`` wrote of the demo's run: the headline and the fallback's text; on Airflow 2.11
    Chromium draws it (both groups' bars, the fallback's disc beside the legend's), as the system test draws the
    api-server's page of three runs on Airflow 3."""
    from html import escape

    from airflow_hetero._compat import AIRFLOW_V_3

    html = page.read_text(encoding="utf-8")
    assert escape(history["headline"]) in html and escape(history["runs"][0]["markers"][0]["text"]) in html
    if AIRFLOW_V_3:
        return
    from support.page_layout import screenshot
    from support.png import colour_count

    from airflow_hetero.plugins.runs_page import GROUP_COLOURS, MARKER_COLOURS

    _, _, pixels = screenshot(page.as_uri(), tmp_path / "runs.png", (1000, 700))
    bars = {colour: colour_count(pixels, colour) for colour in GROUP_COLOURS[:2]}
    assert all(count > 100 for count in bars.values()), bars
    # the capacity colour is in the legend and on the run's disc; the budget colour, no run's, in the legend only
    capacity, budget = (colour_count(pixels, MARKER_COLOURS[kind]) for kind in ("capacity", "budget"))
    assert capacity > budget + 30, (capacity, budget)


def runs_of_the_demo(command: Path, workdir: Path, cwd: Path, page: Path) -> dict[str, Any]:
    """``airflow-hetero runs hetero_retraining train --json --html PAGE`` against the demo's metadata DB (its
    Airflow home)."""
    from airflow_hetero.demo import airflow_environment

    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "AWS_", "PYTHONPATH"))}
    env.update(airflow_environment(workdir, workdir, "{}"))
    done = subprocess.run(
        [str(command), "runs", "hetero_retraining", "train", "--json", "--html", str(page)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=PYTHON_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    history: dict[str, Any] = json.loads(done.stdout)
    return history


@pytest.mark.slow
def test_a_failed_task_shows_its_log_lines_and_error(tmp_path: Path) -> None:
    proc = run_demo(tmp_path / "demo", "--max-final-loss", "1e-12")
    assert proc.returncode == 1
    assert "gate=failed" in proc.stdout
    assert "==> per-group summary" in proc.stdout  # the summary still shows what the job did
    assert_short_and_quiet(proc.stdout)
    assert "running DAG hetero_model_deploy" not in proc.stdout  # a rejected model is not deployed
    err = proc.stderr.splitlines()
    log = tmp_path / "demo" / "airflow.log"
    lines = r"\d+ lines(, \d+ in the middle left out)?"
    assert re.fullmatch(
        rf"demo: the log of task gate \({lines}; all of Airflow's log: {re.escape(str(log))}\):", err[0]
    )
    assert "[DAG TEST] starting task_id=gate" in proc.stderr  # the task's own lines, not another task's
    assert "[DAG TEST] starting task_id=summarize" not in proc.stderr
    assert "Traceback (most recent call last):" in proc.stderr
    assert re.search(r"AirflowFailException: model rejected: final train:loss 0\.\d+ is above 1e-12", proc.stderr)
    assert err[-1].startswith(
        f"demo: the hetero_retraining run ended failed. Look at the task's log above (all of it: {log})"
    )
    assert len(err) <= 1 + 10 + 1 + 50 + 1


@pytest.mark.slow
def test_verbose_prints_airflows_log_on_the_terminal(tmp_path: Path) -> None:
    proc = run_demo(tmp_path / "demo", "--verbose", "--max-final-loss", "1e-12")
    assert proc.returncode == 1
    for chatter in ("[DAG TEST] starting task_id=week", "[DAG TEST] starting task_id=gate", "Submitted training job"):
        assert chatter in proc.stdout + proc.stderr
    assert "model rejected: final train:loss" in proc.stdout + proc.stderr
    assert "Airflow's own log goes to" not in proc.stdout
    assert not (tmp_path / "demo" / "airflow.log").exists()
    assert "demo: the hetero_retraining run ended failed. Look at the task logs above" in proc.stderr


def test_an_error_outside_any_task_is_shown_with_where_the_log_is(tmp_path: Path) -> None:
    """A DAG file that does not import: its traceback on the terminal, not in the log file."""
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "hetero_retraining_dag.py").write_text("raise RuntimeError('this DAG file is broken')\n")
    proc = run_demo(tmp_path / "demo", "--dags-folder", str(dags))
    assert proc.returncode == 1
    log = tmp_path / "demo" / "airflow.log"
    assert f"demo: stopped by the error below; Airflow's log up to it: {log}" in proc.stderr
    assert proc.stderr.rstrip().endswith("RuntimeError: this DAG file is broken")
    assert "this DAG file is broken" not in log.read_text()
    assert proc.stdout.startswith("==> starting the offline SageMaker endpoint")


def test_without_the_local_extra_the_demo_says_what_to_install(tmp_path: Path) -> None:
    proc = run_without_modules(("moto",), "demo", "--workdir", str(tmp_path / "demo"))
    assert proc.returncode == 3
    assert proc.stderr == (
        "airflow-hetero demo: the offline endpoint needs the 'local' extra (No module named 'moto'): "
        "pip install 'airflow-hetero[local]'\n"
    )
    assert proc.stdout == ""
    assert not (tmp_path / "demo").exists()  # checked before anything starts
