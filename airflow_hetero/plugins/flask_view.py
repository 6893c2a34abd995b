"""The Airflow 2.11 webserver's "Instance groups" page: the same page as the api-server app, as a Flask blueprint.

Airflow 2 has no api-server plugin apps and no task-instance views for plugins: there the view is
this blueprint under :data:`airflow_hetero.plugins.app.URL_PREFIX`, reached through the
"Instance groups" extra link of :class:`airflow_hetero.operators.HeteroLogSummaryOperator`. Access
is the webserver's own (``has_access_dag("GET", XCOM)``). Flask and the webserver modules are
imported in :func:`create_blueprint` only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from airflow_hetero.plugins.app import ROUTE, URL_PREFIX, map_index_of
from airflow_hetero.plugins.page import CSP, render_page

Reader = Callable[[str, str, str, int], Any]


def read_summary_airflow2(dag_id: str, run_id: str, task_id: str, map_index: int) -> Any:
    """The task instance's ``return_value`` through Airflow 2's XCom backend; None when there is none."""
    from airflow.models.xcom import XCom

    return XCom.get_one(run_id=run_id, key="return_value", task_id=task_id, dag_id=dag_id, map_index=map_index)


def webserver_guard() -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Airflow 2's access check for reading a DAG's XComs."""
    from airflow.auth.managers.models.resource_details import DagAccessEntity
    from airflow.www.auth import has_access_dag

    guard: Callable[[Callable[..., Any]], Callable[..., Any]] = has_access_dag("GET", DagAccessEntity.XCOM)
    return guard


def create_blueprint(
    reader: Reader = read_summary_airflow2,
    guard: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None,
) -> Any:
    """The blueprint; ``guard`` wraps the view (default: :func:`webserver_guard`)."""
    from flask import Blueprint, Response, request

    blueprint = Blueprint("airflow_hetero_instance_groups", __name__, url_prefix=URL_PREFIX)

    def instance_groups() -> Any:
        args = request.args
        dag_id, run_id, task_id = args.get("dag_id", ""), args.get("run_id", ""), args.get("task_id", "")
        if not (dag_id and run_id and task_id):
            return Response("dag_id, run_id and task_id are required", status=400, mimetype="text/plain")
        index = map_index_of(args.get("map_index"))
        summary = reader(dag_id, run_id, task_id, index)
        where = f"DAG {dag_id}, run {run_id}, task {task_id}" + (f"[{index}]" if index >= 0 else "")
        response = Response(render_page(summary, where=where), mimetype="text/html")
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response

    view = (guard or webserver_guard())(instance_groups)
    blueprint.add_url_rule(ROUTE, "instance_groups", view, methods=["GET"])
    return blueprint
