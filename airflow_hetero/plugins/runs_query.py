"""The Runs view's read of the metadata database, on Airflow 2.11 and 3, with the session it is given: a page of a
DAG's runs, then every XCom of those runs under the view's keys in one query (not one per run).

The XComs asked for are the keys of :data:`~airflow_hetero.plugins.runs_model.READ_KEYS`, and of ``return_value``
only the given task's and the tasks that pushed one of the package's own keys in those runs: the DAG's other
tasks' results never leave the database. Values are deserialised by Airflow's own XCom model. Airflow is imported
when a read is made, not with the module.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow_hetero.plugins.runs_model import OWN_KEYS, READ_KEYS, RunXComs, runs_from_rows
from airflow_hetero.xcom_keys import RESULT_XCOM_KEY


def xcom_model() -> Any:
    """Airflow 3's XCom table model, else Airflow 2's XCom class (the configured backend, which deserialises)."""
    try:
        from airflow.models.xcom import XComModel
    except ImportError:  # Airflow 2
        from airflow.models.xcom import XCom

        return XCom
    return XComModel


def _iso(value: Any) -> str | None:
    return value.isoformat() if isinstance(value, datetime) else None


def read_runs(
    session: Any, dag_id: str, task_id: str, *, page: int, limit: int, map_index: int = -1
) -> tuple[list[RunXComs], bool]:
    """(``limit`` runs of ``dag_id`` on ``page`` (1: the newest), each with its XComs; whether older runs exist).
    Two statements: the page of runs, then the XComs of all of them."""
    from airflow.models.dagrun import DagRun
    from sqlalchemy import or_, select

    if hasattr(DagRun, "run_after"):  # Airflow 3: when the run was due, and its logical date (None when manual)
        due, logical = DagRun.run_after, DagRun.logical_date
    else:  # Airflow 2: the execution date is both
        due = logical = DagRun.execution_date
    query = (
        select(DagRun.run_id, logical, due, DagRun.state)
        .where(DagRun.dag_id == dag_id)
        .order_by(due.desc(), DagRun.id.desc())
        .offset((page - 1) * limit)
        .limit(limit + 1)
    )
    found = session.execute(query).all()
    has_older, found = len(found) > limit, found[:limit]
    ids = [row[0] for row in found]
    rows: list[tuple[str, str, str, Any]] = []
    if ids:
        xcom = xcom_model()
        ours = (
            select(xcom.task_id)
            .where(xcom.dag_id == dag_id, xcom.run_id.in_(ids), xcom.key.in_(OWN_KEYS))
            .distinct()
            .scalar_subquery()
        )
        values = select(xcom.run_id, xcom.task_id, xcom.key, xcom.value).where(
            xcom.dag_id == dag_id,
            xcom.run_id.in_(ids),
            xcom.map_index == map_index,
            xcom.key.in_(READ_KEYS),
            or_(xcom.key != RESULT_XCOM_KEY, xcom.task_id == task_id, xcom.task_id.in_(ours)),
        )
        # columns, not entities: Airflow 2 deserialises an entity's value on load (a custom backend's ORM stand-in)
        rows = [(x.run_id, x.task_id, x.key, xcom.deserialize_value(x)) for x in session.execute(values)]
    runs = [
        (run_id, _iso(day) or _iso(due_at), None if state is None else str(state))
        for run_id, day, due_at, state in found
    ]
    return runs_from_rows(runs, rows), has_older
