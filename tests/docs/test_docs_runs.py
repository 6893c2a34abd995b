"""docs/instance-groups.md: the `airflow-hetero runs` example runs in a fresh interpreter and prints what the page
shows; the page's screenshot of the Runs view is there."""

from __future__ import annotations

from pathlib import Path

from support.doc_examples import DOCS, run_example


def test_the_runs_example_prints_what_the_page_shows(tmp_path: Path) -> None:
    done, shown = run_example("instance-groups.md", "runs", tmp_path)
    assert done.stdout == shown
    assert "cost -33 % since data_group went 2 -> 4 on 2026-11-22; 1 capacity fallback" in done.stdout


def test_the_page_shows_the_runs_screenshot() -> None:
    page = (DOCS / "instance-groups.md").read_text(encoding="utf-8")
    assert "](img/runs.png)" in page and (DOCS / "img" / "runs.png").stat().st_size > 50_000
