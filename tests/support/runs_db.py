"""Runs written into the test's Airflow metadata database as the tasks would leave them: a DAG run row per run, a
task instance row per task, and each XCom set through Airflow's own XCom model (Airflow 2.11 and 3), so the Runs
view reads them back for real."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pendulum

from airflow_hetero.plugins.runs_model import RunXComs


def _tasks(dag_id: str, task_ids: set[str]) -> dict[str, Any]:
    """An EmptyOperator per task id, in a DAG of ``dag_id`` (the task instance rows need a task)."""
    try:
        from airflow.providers.standard.operators.empty import EmptyOperator
        from airflow.sdk import DAG
    except ImportError:  # Airflow 2
        from airflow import DAG  # type: ignore[assignment]
        from airflow.operators.empty import EmptyOperator  # type: ignore[no-redef]

    dag = DAG(dag_id, schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"))
    return {task_id: EmptyOperator(task_id=task_id, dag=dag) for task_id in sorted(task_ids)}


def insert_runs(dag_id: str, runs: Sequence[RunXComs]) -> None:
    """Write ``runs`` of ``dag_id`` (a DAG id no other test uses: rows are never removed)."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    from airflow_hetero.plugins.runs_query import xcom_model

    airflow_3 = hasattr(DagRun, "run_after")
    tasks = _tasks(dag_id, {task for run in runs for task, _ in run.values})
    xcom = xcom_model()
    with create_session() as session:
        for run in runs:
            date = datetime.fromisoformat(str(run.date))
            dates: dict[str, Any] = {"logical_date": date, "run_after": date} if airflow_3 else {"execution_date": date}
            session.add(DagRun(dag_id=dag_id, run_id=run.run_id, run_type="scheduled", state=run.state, **dates))
        session.flush()
        for run in runs:
            for task in tasks.values():
                version: dict[str, Any] = {"dag_version_id": None} if airflow_3 else {}
                session.add(TaskInstance(task, run_id=run.run_id, state=run.state, **version))
        session.flush()
        for run in runs:
            for (task_id, key), value in run.values.items():
                xcom.set(key, value, dag_id=dag_id, task_id=task_id, run_id=run.run_id, session=session)


def xcom_entries(dag_id: str, runs: Sequence[RunXComs]) -> list[dict[str, Any]]:
    """``runs`` as an export of XCom entries (what ``airflow-hetero runs --from-json`` reads)."""
    return [
        {
            "dag_id": dag_id,
            "run_id": run.run_id,
            "task_id": task,
            "key": key,
            "value": value,
            "map_index": -1,
            "logical_date": run.date,
            "state": run.state,
        }
        for run in runs
        for (task, key), value in run.values.items()
    ]
