"""The Runs page and ``airflow-hetero runs`` fed by real runs: the example retraining DAG's three scheduled weeks
(tests/system/dags/system_retraining.py, tests/support/system_retraining.py), run by the scheduler while the other
system tests run; these tests wait for them and go last (tests/system/conftest.py).

What the runs did is read from where it happened: each job's cluster from the endpoint (DescribeTrainingJob), the
failed first attempt from its job list, costs, verdicts and lengths from the tasks' XCom (REST API). The page is
fetched from the api-server with a REST token and drawn by headless Chromium; the command runs in the stack's
environment against its PostgreSQL metadata database, as a user runs it. Each must show every marker the runs
produced (the capacity fallback and the cluster that ran, the right-sizing change, each group's cost, the
summary line) as the runs did it, and the page must show what the command's ``--json`` holds.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from html import escape
from pathlib import Path
from subprocess import PIPE
from typing import Any

import yaml
from support.devtools import Browser
from support.page_layout import nesting_problems
from support.png import colour_count, read_png
from support.system_airflow import BIN, Stack, run_path
from support.system_jobs import client
from support.system_retraining import DAG_ID, JOB_PREFIX, NO_CAPACITY_TYPE, WEEKS

from airflow_hetero import example_dags
from airflow_hetero.amounts import format_amount
from airflow_hetero.logs.cost import priced_nonzero
from airflow_hetero.plugins.runs_page import CHANGE_COLOURS, GROUP_COLOURS, MARKER_COLOURS

DATA, TRAIN = "data_group", "train_group"
#: How long ``airflow-hetero runs`` may take (an Airflow start-up on a loaded machine).
CLI_TIMEOUT = 180
#: The chart's marks, read from the page as Chromium built it: the bars' fills, the discs, the dashed change lines.
MARKS = """JSON.stringify({
  fills: Array.from(document.querySelectorAll('svg.runs-chart > rect'), e => e.getAttribute('fill')),
  discs: Array.from(document.querySelectorAll('svg.runs-chart circle[r="7"]'), e => e.getAttribute('fill')),
  changes: Array.from(document.querySelectorAll('svg.runs-chart line[stroke-dasharray]'),
                      e => e.getAttribute('stroke')),
})"""


@dataclass
class Ran:
    """What one run did, read from the endpoint and from its tasks' XCom."""

    run_id: str
    result: dict[str, Any]  # the training task's return value
    summary: dict[str, Any]  # the summary task's return value
    cluster: dict[str, tuple[int, str]]  # group -> (count, type) of the job that ran (DescribeTrainingJob)


def xcom(stack: Stack, run_id: str, task_id: str) -> Any:
    path = f"{run_path(DAG_ID, run_id)}/taskInstances/{task_id}/xcomEntries/return_value?deserialize=true"
    return stack.rest("GET", path)["value"]


def what_ran(stack: Stack, runs: list[dict[str, Any]]) -> list[Ran]:
    """Each run's job as the endpoint describes it, with its tasks' results (oldest first)."""
    sagemaker = client(stack, "sagemaker")
    found = []
    for run in runs:
        result = xcom(stack, run["dag_run_id"], "train")
        described = sagemaker.describe_training_job(TrainingJobName=result["training_job_name"])
        found.append(Ran(run["dag_run_id"], result, xcom(stack, run["dag_run_id"], "summarize"), cluster_of(described)))
    return found


def cluster_of(described: dict[str, Any]) -> dict[str, tuple[int, str]]:
    """Group -> (count, type) of a DescribeTrainingJob answer."""
    return {
        g["InstanceGroupName"]: (g["InstanceCount"], g["InstanceType"])
        for g in described["ResourceConfig"]["InstanceGroups"]
    }


def ran_text(cluster: dict[str, tuple[int, str]]) -> str:
    return ", ".join(f"{name}={count} x {kind}" for name, (count, kind) in cluster.items())


@contextmanager
def runs_command(stack: Stack) -> Iterator[subprocess.Popen[str]]:
    """``airflow-hetero runs DAG_ID train --json`` started in the stack's environment (its PostgreSQL metadata DB),
    to read with :func:`runs_json` (it starts Airflow meanwhile); killed if the test ends first."""
    command = [str(BIN / "airflow-hetero"), "runs", DAG_ID, "train", "--json"]
    proc = subprocess.Popen(command, env=stack.env, cwd=stack.root, stdout=PIPE, stderr=PIPE, text=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=CLI_TIMEOUT)


def runs_json(proc: subprocess.Popen[str]) -> dict[str, Any]:
    """What the command printed: the data the page draws."""
    out, err = proc.communicate(timeout=CLI_TIMEOUT)
    assert proc.returncode == 0, err[-3000:]
    history: dict[str, Any] = json.loads(out)
    return history


def group_cell(group: dict[str, Any]) -> str:
    """A group's line in the page's table, its cost as the page formats a known non-zero amount."""
    known = priced_nonzero(group["instance_seconds"], group["price_per_hour"])
    return f"{group['name']} {group['count']} x {group['type']}: {format_amount(group['cost'], known_nonzero=known)}"


def test_the_runs_page_and_command_show_what_the_scheduled_runs_did(
    stack: Stack, retraining_runs: list[dict[str, Any]]
) -> None:
    assert [r["state"] for r in retraining_runs] == ["success"] * len(WEEKS), retraining_runs
    with runs_command(stack) as command:
        the_page_and_the_command_show_what_ran(stack, retraining_runs, command)


def the_page_and_the_command_show_what_ran(
    stack: Stack, runs: list[dict[str, Any]], command: subprocess.Popen[str]
) -> None:
    ran = what_ran(stack, runs)
    job = yaml.safe_load((example_dags.folder() / "hetero_retraining" / "job.yaml").read_text())
    planned = {g["instance_group_name"]: g for g in job["instance_groups"]}
    (fallback_type,) = planned[TRAIN]["fallback_instance_types"]
    # what the runs did: the first attempt found no capacity, its run fell back; the next two ran the plan,
    # and the third with the data group right-sizing grew
    sagemaker = client(stack, "sagemaker")
    (attempt,) = sagemaker.list_training_jobs(NameContains=JOB_PREFIX, StatusEquals="Failed")["TrainingJobSummaries"]
    first = sagemaker.describe_training_job(TrainingJobName=attempt["TrainingJobName"])
    assert first["FailureReason"].startswith("CapacityError"), first["FailureReason"]
    assert cluster_of(first)[TRAIN] == (1, NO_CAPACITY_TYPE)
    assert ran[0].cluster[TRAIN] == (1, fallback_type)
    assert [r.cluster[TRAIN] for r in ran[1:]] == [(1, NO_CAPACITY_TYPE)] * 2
    before, after = ran[1].cluster[DATA][0], ran[2].cluster[DATA][0]
    assert before == planned[DATA]["instance_count"] and after > before, [r.cluster for r in ran]

    # the page as the api-server answers it and as Chromium draws it (meanwhile the command starts Airflow)
    status, html, headers = stack.get_text(f"/hetero/runs?dag_id={DAG_ID}&task_id=train")
    with Browser() as browser:
        url = f"{stack.api_url}/hetero/runs?dag_id={DAG_ID}&task_id=train"
        session = browser.open(url, {"Authorization": f"Bearer {stack.token}"}, 1400, 900)
        marks = json.loads(browser.evaluate(session, MARKS))
        shot = browser.screenshot(session, stack.root / "logs" / "runs-real.png")
    history = runs_json(command)
    rows = list(reversed(history["runs"]))  # oldest first, as ``ran``
    assert (history["training_task"], history["summary_task"], history["notes"]) == ("train", "summarize", [])
    assert [row["date"][:10] for row in rows] == list(WEEKS)
    for row, did in zip(rows, ran, strict=True):
        assert (row["run_id"], row["job"], row["status"]) == (did.run_id, did.result["training_job_name"], "Completed")
        assert {g["name"]: (g["count"], g["type"]) for g in row["groups"]} == did.cluster
        cost = did.summary["cost"]
        assert row["cost"] == cost["total"] and row["currency"] == cost["currency"] and row["cost"] > 0
        for group in row["groups"]:
            assert group["cost"] == cost["groups"][group["name"]]["cost"] and group["cost"] > 0, group
        assert row["seconds"] == did.result["training_seconds"]
        verdict = did.summary["verdict"]
        assert (row["verdict_kind"], row["bottleneck"], row["verdict"]) == (
            verdict["kind"],
            verdict.get("bottleneck"),
            verdict["message"],
        )
        assert row["missing"] == [], row["missing"]
    assert [[m["kind"] for m in row["markers"]] for row in rows] == [["capacity"], [], []]
    (fallback,) = rows[0]["markers"]
    assert fallback["text"] == (
        f"capacity fallback: {TRAIN} fell back {NO_CAPACITY_TYPE} -> {fallback_type} (1 attempt failed: "
        f"CapacityError); ran {ran_text(ran[0].cluster)}"
    )
    assert ran[1].summary["verdict"]["bottleneck"] == DATA  # the evidence the change rests on
    assert [row["decision"]["action"] for row in rows] == ["kept", "kept", "changed"]
    change = rows[2]["decision"]["line"]
    assert change.startswith(f"applied: {DATA} {before} -> {after}: "), change
    # the summary line: the cost of the run on the grown cluster against the one before it on the cluster planned
    # (the fallback run's dearer type is no effect of the change), the change and its week, the fallback
    said = re.fullmatch(
        rf"last {len(WEEKS)} runs: cost (±0|[+-][\d.]+) % since {DATA} went {before} -> {after} on {WEEKS[2]}; "
        "1 capacity fallback",
        history["headline"],
    )
    assert said, history["headline"]
    moved = (ran[2].summary["cost"]["total"] / ran[1].summary["cost"]["total"] - 1) * 100
    assert abs((0.0 if said.group(1) == "±0" else float(said.group(1))) - moved) <= 0.5, (said.group(1), moved)

    # the page draws the same data
    assert status == 200 and headers["content-security-policy"].startswith("default-src 'none'")
    assert nesting_problems(html) == []
    assert f'<div class="headline">{escape(history["headline"])}</div>' in html
    assert "runs 1 to 3, newest first" in html
    for row in rows:
        assert escape(row["run_id"]) in html and escape(row["decision"]["line"]) in html
        for marker in row["markers"]:
            assert escape(marker["text"]) in html
        for group in row["groups"]:
            assert escape(group_cell(group)) in html, group_cell(group)

    # the chart: a bar of each group per run, one fallback disc, one change line; and Chromium painted them (more
    # of each colour than its legend's swatch: 140 px for a group, 90 for a disc, 40 for a line, seen 2026-12)
    assert [marks["fills"].count(colour) for colour in GROUP_COLOURS[:2]] == [len(WEEKS)] * 2, marks
    assert (marks["discs"], marks["changes"]) == ([MARKER_COLOURS["capacity"]], [CHANGE_COLOURS["changed"]]), marks
    _, _, pixels = read_png(shot)
    data, train = GROUP_COLOURS[:2]
    least = {data: 400, train: 150, MARKER_COLOURS["capacity"]: 200, CHANGE_COLOURS["changed"]: 300}
    drawn = {colour: colour_count(pixels, colour) for colour in least}
    assert all(drawn[colour] > count for colour, count in least.items()), (drawn, shot)


def _function_sources(path: Path) -> dict[str, str]:
    tree = ast.parse(path.read_text())
    return {node.name: ast.unparse(node) for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}


def test_the_system_dag_keeps_the_examples_tasks() -> None:
    """The week and gate tasks are the example's own (the system DAG differs only where its docstring says)."""
    example = _function_sources(example_dags.folder() / "hetero_retraining_dag.py")
    system = _function_sources(Path(__file__).parent / "dags" / "system_retraining.py")
    for name in ("week", "gate"):
        assert system[name] == example[name], name
