"""``InstanceGroupsPlugin``: the "Instance groups" and "Runs" views in the Airflow UI (entry point ``airflow.plugins``).

Airflow 3: external views, served by the api-server app of :mod:`airflow_hetero.plugins.app`: "Instance groups"
with destination ``task_instance`` (a tab on every task instance page; the UI fills in ``{DAG_ID}``,
``{RUN_ID}``, ``{TASK_ID}``, ``{MAP_INDEX}``), "Runs" with destination ``task`` (the task's last runs) and
``task_instance`` (the same, that run highlighted, beside the Instance groups tab). Airflow 2.11: the Flask
blueprint of :mod:`airflow_hetero.plugins.flask_view`, opened from the summary task's extra link (and the Runs
page from the Instance groups page's link). Loading this
module imports neither FastAPI nor Flask (task processes load every plugin).
"""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

from airflow_hetero.plugins.app import RUNS_TASK_HREF, RUNS_TI_HREF, URL_PREFIX, VIEW_HREF, LazyApp

NAME = "Instance groups"
#: The Runs view's tab: on the task's page (its runs) and on each task instance's (its run highlighted).
RUNS_NAME = "Runs"


def airflow_major() -> int:
    """The installed Airflow's major version."""
    from importlib.metadata import version

    return int(version("apache-airflow").split(".")[0])


class _FlaskBlueprints:
    """``flask_blueprints`` of Airflow 2: built once, when the webserver first reads them."""

    def __init__(self) -> None:
        self._built: list[Any] | None = None

    def __get__(self, instance: Any, owner: Any) -> list[Any]:
        if self._built is None:
            if airflow_major() >= 3:
                self._built = []
            else:
                from airflow_hetero.plugins.flask_view import create_blueprint

                self._built = [create_blueprint()]
        return self._built


class InstanceGroupsPlugin(AirflowPlugin):
    """Per-group utilisation charts and the bottleneck verdict of a log summary task; a training task's runs."""

    name = "airflow_hetero"
    external_views = [
        {
            "name": NAME,
            "href": VIEW_HREF,
            "destination": "task_instance",
            "url_route": "hetero-instance-groups",
        },
        {"name": RUNS_NAME, "href": RUNS_TASK_HREF, "destination": "task", "url_route": "hetero-runs"},
        {"name": RUNS_NAME, "href": RUNS_TI_HREF, "destination": "task_instance", "url_route": "hetero-runs-of-run"},
    ]
    fastapi_apps = [{"app": LazyApp(), "url_prefix": URL_PREFIX, "name": NAME}]
    flask_blueprints = _FlaskBlueprints()
