"""The Runs view's answer, the same on both servers: read a page of runs with the session given (one query for
their XComs, :mod:`~airflow_hetero.plugins.runs_query`), build the rows (:mod:`~.runs_history`), render the page
(:mod:`~.runs_page`). The Airflow 3 app (:mod:`~.app`) and the 2.11 blueprint (:mod:`~.flask_view`) check access
first, as for the Instance groups view, and call :func:`runs_html`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_hetero.plugins.runs_history import run_history
from airflow_hetero.plugins.runs_model import DEFAULT_LIMIT, checked_limit, checked_page
from airflow_hetero.plugins.runs_page import render_runs_page, task_where
from airflow_hetero.plugins.runs_query import read_runs


@dataclass(frozen=True)
class RunsQuery:
    """What the view is asked for (its query string, checked)."""

    dag_id: str
    task_id: str
    run_id: str | None = None  # the task instance the page was opened from (highlighted), if any
    map_index: int = -1
    page: int = 1
    limit: int = DEFAULT_LIMIT

    def __post_init__(self) -> None:
        checked_page(self.page)
        checked_limit(self.limit)

    def params(self) -> dict[str, str]:
        """The query the pager's links keep (the page aside)."""
        kept = {"dag_id": self.dag_id, "task_id": self.task_id, "map_index": str(self.map_index)}
        if self.run_id:
            kept["run_id"] = self.run_id
        if self.limit != DEFAULT_LIMIT:
            kept["limit"] = str(self.limit)
        return kept


def runs_html(session: Any, asked: RunsQuery) -> str:
    """The page for ``asked``, read with ``session``."""
    runs, older = read_runs(
        session, asked.dag_id, asked.task_id, page=asked.page, limit=asked.limit, map_index=asked.map_index
    )
    history = run_history(asked.dag_id, asked.task_id, runs, page=asked.page, limit=asked.limit, has_older=older)
    where = task_where(asked.dag_id, asked.task_id, asked.map_index)
    return render_runs_page(history, where=where, params=asked.params(), current_run=asked.run_id)
