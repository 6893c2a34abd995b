"""What the demo copies from Airflow's log when a task fails: the task's own lines, head and tail; the
capacity it takes away from the example job."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import yaml

from airflow_hetero import example_dags
from airflow_hetero.demo import (
    FAILED_TASK_HEAD,
    FAILED_TASK_TAIL,
    NO_CAPACITY_TYPE,
    Terminal,
    show_failed_tasks,
    task_sections,
)


@dataclass
class TI:
    task_id: str
    state: str


@dataclass
class Run:
    tis: list[TI]

    def get_task_instances(self) -> list[TI]:
        return self.tis


def start(task: str) -> str:  # Airflow 3's wording; 2.11's differs only before the marker
    return f"2026-12-02T03:52:01Z [info     ] [DAG TEST] starting task_id={task} map_index=-1 [airflow.sdk]"


def test_each_task_has_its_own_lines_and_a_retry_replaces_the_first_try() -> None:
    log = "\n".join(
        [
            "before any task",
            start("week"),
            "week ran",
            start("gate"),
            "first try",
            start("gate"),
            "second try",
            "[2026-12-02T03:49:12.837+0000] {dagrun.py:905} INFO - DagRun Finished: dag_id=x",
            "after the run",
        ]
    )
    sections = task_sections(log)
    assert sections == {"week": [start("week"), "week ran"], "gate": [start("gate"), "second try"]}


def failed_output(tmp_path: Path, log: str, run: Run) -> list[str]:
    path = tmp_path / "airflow.log"
    path.write_text("an earlier run's line\n" + log)
    err = io.StringIO()
    show_failed_tasks(Terminal(io.StringIO(), err, path), run, since=len("an earlier run's line\n"))
    return err.getvalue().splitlines()


def test_a_long_failed_task_log_keeps_its_start_and_its_error(tmp_path: Path) -> None:
    body = [f"line {n}" for n in range(100)]
    log = "\n".join([start("train"), "train ok", start("gate"), *body, "AirflowFailException: model rejected"])
    out = failed_output(tmp_path, log, Run([TI("train", "success"), TI("gate", "failed")]))
    total = 1 + len(body) + 1
    cut = total - FAILED_TASK_HEAD - FAILED_TASK_TAIL
    assert out[0] == (
        f"demo: the log of task gate ({total} lines, {cut} in the middle left out; "
        f"all of Airflow's log: {tmp_path / 'airflow.log'}):"
    )
    assert out[1] == start("gate")  # which task, from its first line
    assert out[1 + FAILED_TASK_HEAD] == f"... ({cut} lines)"
    assert out[-1] == "AirflowFailException: model rejected"
    assert len(out) == 1 + FAILED_TASK_HEAD + 1 + FAILED_TASK_TAIL
    assert "train ok" not in out


def test_a_short_failed_task_log_is_copied_whole_for_each_failed_task(tmp_path: Path) -> None:
    log = "\n".join([start("a"), "a broke", start("b"), "b broke"])
    out = failed_output(tmp_path, log, Run([TI("a", "failed"), TI("b", "up_for_retry")]))
    assert out[1:3] == [start("a"), "a broke"] and out[4:] == [start("b"), "b broke"]
    assert out[0].startswith("demo: the log of task a (2 lines; ") and out[3].startswith(
        "demo: the log of task b (2 lines; "
    )


def test_without_task_markers_the_end_of_the_runs_log_is_shown(tmp_path: Path) -> None:
    lines = [f"line {n}" for n in range(80)]
    out = failed_output(tmp_path, "\n".join(lines), Run([TI("gate", "failed")]))
    assert out[0].startswith(f"demo: the log of the run ({FAILED_TASK_TAIL} lines; ")
    assert out[1:] == lines[-FAILED_TASK_TAIL:]
    assert "an earlier run's line" not in out


def test_the_demo_takes_away_the_capacity_of_the_example_training_groups_first_choice() -> None:
    """So its summary shows a fallback: the type is the one job.yaml gives train_group, which has a fallback."""
    job = yaml.safe_load((example_dags.folder() / "hetero_retraining" / "job.yaml").read_text())
    train = next(g for g in job["instance_groups"] if g["instance_group_name"] == "train_group")
    assert train["instance_type"] == NO_CAPACITY_TYPE
    assert train["fallback_instance_types"] == ["ml.g5.2xlarge"]
