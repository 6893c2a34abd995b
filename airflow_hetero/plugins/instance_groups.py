"""``InstanceGroupsPlugin``: the "Instance groups" view in the Airflow UI (entry point ``airflow.plugins``).

Airflow 3: an external view with destination ``task_instance`` (a tab on every task instance page;
the UI fills in ``{DAG_ID}``, ``{RUN_ID}``, ``{TASK_ID}``, ``{MAP_INDEX}``) served by the api-server
app of :mod:`airflow_hetero.plugins.app`. Airflow 2.11: the Flask blueprint of
:mod:`airflow_hetero.plugins.flask_view`, opened from the summary task's extra link. Loading this
module imports neither FastAPI nor Flask (task processes load every plugin).
"""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

from airflow_hetero.plugins.app import URL_PREFIX, VIEW_HREF, LazyApp

NAME = "Instance groups"


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
    """Per-group utilisation charts and the bottleneck verdict of a log summary task."""

    name = "airflow_hetero"
    external_views = [
        {
            "name": NAME,
            "href": VIEW_HREF,
            "destination": "task_instance",
            "url_route": "hetero-instance-groups",
        }
    ]
    fastapi_apps = [{"app": LazyApp(), "url_prefix": URL_PREFIX, "name": NAME}]
    flask_blueprints = _FlaskBlueprints()
