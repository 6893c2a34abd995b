"""The "Instance groups" extra link of the log summary task: the per-group charts and verdict page.

On Airflow 2.11 this link is the way to the view (served by the webserver blueprint of
:mod:`airflow_hetero.plugins.flask_view`); on Airflow 3 the view is also a tab of the task
instance page, and the link opens it on its own. The URL is built from the task instance alone,
so it works as soon as the task ran (Airflow 2 calls :meth:`InstanceGroupsLink.get_link`; Airflow 3
reads the URL the operator pushes under the link's ``xcom_key``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from airflow_hetero._compat import BaseOperatorLink
from airflow_hetero.plugins.app import ROUTE, URL_PREFIX

if TYPE_CHECKING:
    from airflow_hetero._compat import BaseOperator, Context, TaskInstanceKey


def instance_groups_url(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
    """The view's address (relative to the Airflow UI's origin) for one task instance."""
    query = urlencode({"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "map_index": map_index})
    return f"{URL_PREFIX}{ROUTE}?{query}"


class InstanceGroupsLink(BaseOperatorLink):
    """Per-group utilisation charts and the bottleneck verdict of this summary task."""

    name = "Instance groups"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        """The view of this task instance."""
        return instance_groups_url(ti_key.dag_id, ti_key.run_id, ti_key.task_id, ti_key.map_index)


def persist_instance_groups_link(context: Context) -> None:
    """Push the link's URL under its ``xcom_key`` (how Airflow 3 reads extra links); Airflow 2's
    links have no ``xcom_key`` and call :meth:`InstanceGroupsLink.get_link` instead: nothing to push."""
    key = getattr(InstanceGroupsLink(), "xcom_key", None)
    if not key:
        return
    ti: Any = context["ti"]
    url = instance_groups_url(ti.dag_id, ti.run_id, ti.task_id, getattr(ti, "map_index", -1))
    ti.xcom_push(key=key, value=url)
