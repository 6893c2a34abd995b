"""``airflow-hetero runs`` against a real Airflow metadata database: 32 runs written through Airflow's own models,
read back in pages of the Airflow CLI's session with one query for every run's XComs; ``--json`` is the data the
view draws, the same as from an export (``--from-json``) and as from the runs themselves."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.runs_db import insert_runs, xcom_entries

from airflow_hetero.cli import main
from airflow_hetero.plugins.runs_history import run_history
from benchmarks.runs_data import retraining_runs

DAG_ID = "hetero_runs_cli"
RUNS = 32


@pytest.fixture(scope="module")
def written(airflow_db: None) -> None:
    insert_runs(DAG_ID, retraining_runs(RUNS))


@pytest.fixture
def statements() -> Iterator[list[str]]:
    """The SQL statements Airflow's engine executes meanwhile."""
    from airflow import settings
    from sqlalchemy import event

    seen: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    event.listen(settings.engine, "before_cursor_execute", count)
    yield seen
    event.remove(settings.engine, "before_cursor_execute", count)


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["runs", *args]) == 0
    return capsys.readouterr().out


@pytest.mark.slow
def test_pages_of_the_table_from_the_metadata_database(
    written: None, statements: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    out = run_cli(capsys, DAG_ID, "train")
    selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert len(selects) == 2 and "xcom" in selects[1].lower()  # the page of runs, then every run's XComs at once
    lines = out.splitlines()
    model = run_history(DAG_ID, "train", retraining_runs(RUNS)[:30])  # what the runs themselves say
    assert lines[0] == f"Runs of train in {DAG_ID}: {model.headline}"
    assert "cost -32 % since data_group went 2 -> 4 on 2026-09-27; 5 capacity fallbacks; 1 budget stop" in lines[0]
    header = next(i for i, line in enumerate(lines) if line.startswith("date  "))
    marks = next(i for i, line in enumerate(lines) if line.startswith("marks: "))
    assert marks - header - 1 == 30  # one line per run
    assert "2026-12-06  failed: AlgorithmError: ExecuteUserScriptError: exit 1" in lines
    assert lines[-1] == "older runs: --page 2"
    older = run_cli(capsys, DAG_ID, "summarize", "--page", "2")
    second = run_history(DAG_ID, "summarize", retraining_runs(RUNS)[30:], page=2).headline
    assert older.splitlines()[0] == f"Runs of train in {DAG_ID}: {second}" and second.startswith("older 2 runs: ")
    assert "older runs" not in older


@pytest.mark.slow
def test_json_is_the_data_the_view_draws_from_the_database_or_an_export(
    written: None, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    expected = run_history(DAG_ID, "train", retraining_runs(RUNS)[:10], limit=10, has_older=True).as_dict()
    from_db = json.loads(run_cli(capsys, DAG_ID, "train", "--limit", "10", "--json"))
    assert from_db == expected
    export = tmp_path / "xcoms.json"
    export.write_text(json.dumps({"xcom_entries": xcom_entries(DAG_ID, retraining_runs(RUNS))}))
    from_export = json.loads(run_cli(capsys, DAG_ID, "train", "--limit", "10", "--json", "--from-json", str(export)))
    assert from_export == expected


def test_bad_arguments_exit_2_with_the_reason(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for args in (["--limit", "0"], ["--limit", "101"], ["--page", "0"], ["--from-json", str(tmp_path / "none.json")]):
        with pytest.raises(SystemExit) as exit_info:
            main(["runs", DAG_ID, "train", *args])
        assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "runs per page must be 1 to 100, got 0" in err and "cannot read" in err
    (tmp_path / "bad.json").write_text('{"xcom_entries": 3}')
    with pytest.raises(SystemExit):
        main(["runs", DAG_ID, "train", "--from-json", str(tmp_path / "bad.json")])
    assert "expected a JSON list of XCom entries" in capsys.readouterr().err


def test_html_writes_the_page_the_view_draws_with_the_commands_pager(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``--html FILE``: the view's page of the same runs in one file, no script, its pager in the command's words."""
    from support.page_layout import nesting_problems

    export = tmp_path / "xcoms.json"
    export.write_text(json.dumps(xcom_entries(DAG_ID, retraining_runs(RUNS))))
    page = tmp_path / "runs.html"
    table = run_cli(
        capsys, DAG_ID, "train", "--page", "2", "--limit", "10", "--from-json", str(export), "--html", str(page)
    )
    html = page.read_text(encoding="utf-8")
    history = run_history(DAG_ID, "train", retraining_runs(RUNS)[10:20], page=2, limit=10, has_older=True)
    assert table.splitlines()[0] == f"Runs of train in {DAG_ID}: {history.headline}"  # the table still printed
    assert html.startswith("<!doctype html>") and nesting_problems(html) == [] and "<script" not in html
    assert "runs 11 to 20, newest first" in html and html.count("<tr") == 11
    assert '<p class="pager muted">older runs: --page 3; newer runs: --page 1</p>' in html and "href=" not in html
    assert f"DAG {DAG_ID}, task train (its summary task: summarize)." in html
