"""Operator extra links: the job's SageMaker console page and its CloudWatch logs (loaded lazily).

The class paths ``airflow_hetero.links.training.<Name>`` (where they are defined, as Airflow
serializes them) are registered in ``get_provider_info()``.

On Airflow 3 the training operator declares :class:`DeferredLink` stand-ins: a DAG parse serializes
only each link's name and XCom key, and importing the link classes would build Airflow's attrs-made
``BaseOperatorLink`` in every forked parse (about 1.4 ms, a third of what the operator's import costs).
The worker's ``get_link`` loads the real class. Airflow 2.11 serializes the link's class path, so it
gets the link classes themselves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_hetero import lazy_exports

if TYPE_CHECKING:
    from airflow_hetero._compat import BaseOperator, TaskInstanceKey
    from airflow_hetero.links.training import SageMakerTrainingJobLink, TrainingJobLogsLink

__all__ = ["TRAINING_LINK_NAMES", "DeferredLink", "SageMakerTrainingJobLink", "TrainingJobLogsLink", "training_links"]

#: The training operator's extra links: each class (in ``links.training``) and its button name.
TRAINING_LINK_NAMES = {"SageMakerTrainingJobLink": "SageMaker Training Job", "TrainingJobLogsLink": "Training Job Logs"}


class DeferredLink:
    """An extra link as an Airflow 3 DAG parse needs it: its name and XCom key; the class loads on ``get_link``."""

    __slots__ = ("class_name", "name", "xcom_key")

    def __init__(self, class_name: str) -> None:
        self.class_name = class_name
        self.name = TRAINING_LINK_NAMES[class_name]
        self.xcom_key = f"_link_{class_name}"  # BaseOperatorLink's own default key

    def link(self) -> Any:
        """The real link (an instance of the class this one stands for)."""
        from airflow_hetero.links import training

        return getattr(training, self.class_name)()

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        """The URL, built by the real link (Airflow 3's task runner calls this after the task)."""
        return str(self.link().get_link(operator, ti_key=ti_key))

    def __repr__(self) -> str:
        return f"DeferredLink({self.class_name!r})"


def training_links() -> tuple[Any, ...]:
    """The training operator's ``operator_extra_links`` for the running Airflow."""
    from airflow_hetero._compat import AIRFLOW_V_3  # here: importing the folder loads no Airflow

    if AIRFLOW_V_3:
        return tuple(DeferredLink(name) for name in TRAINING_LINK_NAMES)
    from airflow_hetero.links import training

    return tuple(getattr(training, name)() for name in TRAINING_LINK_NAMES)


__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "SageMakerTrainingJobLink": "airflow_hetero.links.training",
        "TrainingJobLogsLink": "airflow_hetero.links.training",
    },
)
