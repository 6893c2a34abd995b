"""The Airflow 2.11 webserver's "Instance groups" and "Runs" pages: the same pages as the api-server app, as a
Flask blueprint.

Airflow 2 has no api-server plugin apps and no task-instance views for plugins: there the views are
this blueprint under :data:`airflow_hetero.plugins.app.URL_PREFIX`, reached through the
"Instance groups" extra link of :class:`airflow_hetero.operators.HeteroLogSummaryOperator`, and from that page
the link to its task's runs. Access is the webserver's own (``has_access_dag("GET", XCOM)``) for both. Flask and
the webserver modules are imported in :func:`create_blueprint` only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from airflow_hetero.plugins.app import ROUTE, RUNS_ROUTE, URL_PREFIX, map_index_of, runs_url
from airflow_hetero.plugins.page import CSP, render_page

if TYPE_CHECKING:
    from airflow_hetero.plugins.runs_view import RunsQuery

Reader = Callable[[str, str, str, int], Any]
#: Answers the Runs page of a query (Airflow 2's session opened inside).
RunsReader = Callable[["RunsQuery"], str]


def read_summary_airflow2(dag_id: str, run_id: str, task_id: str, map_index: int) -> Any:
    """The task instance's ``return_value`` through Airflow 2's XCom backend; None when there is none."""
    from airflow.models.xcom import XCom

    return XCom.get_one(run_id=run_id, key="return_value", task_id=task_id, dag_id=dag_id, map_index=map_index)


def runs_page_airflow2(asked: RunsQuery) -> str:
    """The Runs page, read with a session of Airflow 2's metadata database."""
    from airflow.utils.session import create_session

    from airflow_hetero.plugins.runs_view import runs_html

    with create_session() as session:
        return runs_html(session, asked)


def webserver_guard() -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Airflow 2's access check for reading a DAG's XComs."""
    from airflow.auth.managers.models.resource_details import DagAccessEntity
    from airflow.www.auth import has_access_dag

    guard: Callable[[Callable[..., Any]], Callable[..., Any]] = has_access_dag("GET", DagAccessEntity.XCOM)
    return guard


def create_blueprint(
    reader: Reader = read_summary_airflow2,
    guard: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None,
    runs_reader: RunsReader = runs_page_airflow2,
) -> Any:
    """The blueprint; ``guard`` wraps each view (default: :func:`webserver_guard`)."""
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
        runs = runs_url(dag_id, task_id, run_id, index)
        return _html(render_page(summary, where=where, runs_href=runs))

    def runs() -> Any:
        from airflow_hetero.plugins.runs_model import DEFAULT_LIMIT
        from airflow_hetero.plugins.runs_view import RunsQuery

        args = request.args
        dag_id, task_id = args.get("dag_id", ""), args.get("task_id", "")
        if not (dag_id and task_id):
            return Response("dag_id and task_id are required", status=400, mimetype="text/plain")
        try:
            index, page = map_index_of(args.get("map_index")), int(args.get("page") or 1)
            limit = int(args.get("limit") or DEFAULT_LIMIT)
            asked = RunsQuery(dag_id, task_id, args.get("run_id") or None, index, page, limit)
        except ValueError as err:
            return Response(str(err), status=400, mimetype="text/plain")
        return _html(runs_reader(asked))

    check = guard or webserver_guard()
    blueprint.add_url_rule(ROUTE, "instance_groups", check(instance_groups), methods=["GET"])
    blueprint.add_url_rule(RUNS_ROUTE, "runs", check(runs), methods=["GET"])
    return blueprint


def _html(page: str) -> Any:
    """``page`` as the response both views answer: HTML, with the CSP that lets it load nothing."""
    from flask import Response

    response = Response(page, mimetype="text/html")
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response
