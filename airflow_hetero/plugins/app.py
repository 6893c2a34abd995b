"""The Airflow 3 api-server app of the "Instance groups" and "Runs" views: the pages of a task instance, and of a
task's last runs, from XCom.

Mounted by :class:`airflow_hetero.plugins.instance_groups.InstanceGroupsPlugin` under
:data:`URL_PREFIX`. ``GET /instance-groups?dag_id=&run_id=&task_id=&map_index=`` reads the task
instance's ``return_value`` from the metadata database and answers the page of
:func:`airflow_hetero.plugins.page.render_page`; ``GET /runs?dag_id=&task_id=[&run_id=&map_index=&page=&limit=]``
answers the Runs view (:func:`airflow_hetero.plugins.runs_view.runs_html`). Access is Airflow's own for both:
the caller must be allowed to read the DAG's XComs (the UI's session cookie or a bearer token). FastAPI is
imported only when the first request arrives (:class:`LazyApp`), so processes that merely load plugins pay
nothing.

No ``from __future__ import annotations`` here: FastAPI reads the route's annotations, which name
classes imported inside :func:`create_app`.
"""

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlencode

URL_PREFIX = "/hetero"
ROUTE = "/instance-groups"
#: The page's address with the placeholders the Airflow 3 UI fills in for a task instance view.
VIEW_HREF = f"{URL_PREFIX}{ROUTE}?dag_id={{DAG_ID}}&run_id={{RUN_ID}}&task_id={{TASK_ID}}&map_index={{MAP_INDEX}}"
#: The Runs view: a task's last runs (docs/instance-groups.md), on the task's page and on each task instance's.
RUNS_ROUTE = "/runs"
RUNS_TASK_HREF = f"{URL_PREFIX}{RUNS_ROUTE}?dag_id={{DAG_ID}}&task_id={{TASK_ID}}"
RUNS_TI_HREF = f"{RUNS_TASK_HREF}&run_id={{RUN_ID}}&map_index={{MAP_INDEX}}"



def runs_url(dag_id: str, task_id: str, run_id: str | None = None, map_index: int = -1) -> str:
    """The Runs view's address (relative to the UI's origin) of a task, with the run to highlight, if any."""
    query = {"dag_id": dag_id, "task_id": task_id, "map_index": map_index, **({"run_id": run_id} if run_id else {})}
    return f"{URL_PREFIX}{RUNS_ROUTE}?{urlencode(query)}"


Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def map_index_of(text: str | None) -> int:
    """The ``map_index`` query value as an int; -1 (not mapped) for none, or for a placeholder the UI
    left unfilled."""
    try:
        return int(text) if text not in (None, "") else -1
    except ValueError:
        return -1


def read_summary(session: Any, dag_id: str, run_id: str, task_id: str, map_index: int) -> Any:
    """The task instance's ``return_value`` XCom, deserialised; None when there is none."""
    from airflow.models.xcom import XComModel

    query = XComModel.get_many(
        run_id=run_id, key="return_value", dag_ids=dag_id, task_ids=task_id, map_indexes=map_index, limit=1
    )
    row = session.scalars(query).first()
    return XComModel.deserialize_value(row) if row is not None else None


def create_app() -> Any:
    """The FastAPI app (imports FastAPI and Airflow's api-server helpers)."""
    from typing import Annotated

    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
    from airflow.api_fastapi.common.db.common import SessionDep
    from airflow.api_fastapi.core_api.security import requires_access_dag
    from fastapi import Depends, FastAPI, Query
    from fastapi.responses import HTMLResponse

    from airflow_hetero.plugins.page import CSP, render_page
    from airflow_hetero.plugins.runs_model import DEFAULT_LIMIT, MAX_LIMIT
    from airflow_hetero.plugins.runs_view import RunsQuery, runs_html

    app = FastAPI(title="airflow-hetero: instance groups", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get(
        ROUTE,
        response_class=HTMLResponse,
        dependencies=[Depends(requires_access_dag(method="GET", access_entity=DagAccessEntity.XCOM))],
    )
    def instance_groups(
        session: SessionDep,
        dag_id: Annotated[str, Query(min_length=1)],
        run_id: Annotated[str, Query(min_length=1)],
        task_id: Annotated[str, Query(min_length=1)],
        map_index: str | None = None,
    ) -> HTMLResponse:
        index = map_index_of(map_index)
        summary = read_summary(session, dag_id, run_id, task_id, index)
        where = f"DAG {dag_id}, run {run_id}, task {task_id}" + (f"[{index}]" if index >= 0 else "")
        return HTMLResponse(
            render_page(summary, where=where, runs_href=runs_url(dag_id, task_id, run_id, index)),
            headers={"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff"},
        )

    @app.get(
        RUNS_ROUTE,
        response_class=HTMLResponse,
        dependencies=[Depends(requires_access_dag(method="GET", access_entity=DagAccessEntity.XCOM))],
    )
    def runs(
        session: SessionDep,
        *,
        dag_id: Annotated[str, Query(min_length=1)],
        task_id: Annotated[str, Query(min_length=1)],
        run_id: str | None = None,
        map_index: str | None = None,
        page: Annotated[int, Query(ge=1)] = 1,
        limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    ) -> HTMLResponse:
        current = run_id if run_id and run_id != "{RUN_ID}" else None  # a placeholder the UI left unfilled
        asked = RunsQuery(dag_id, task_id, current, map_index_of(map_index), page, limit)
        return HTMLResponse(
            runs_html(session, asked), headers={"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff"}
        )

    return app


class LazyApp:
    """An ASGI app that builds :func:`create_app` at its first request."""

    def __init__(self) -> None:
        self._app: Any = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Hand the request to the real app, building it first if needed."""
        if self._app is None:
            self._app = create_app()
        await self._app(scope, receive, send)
