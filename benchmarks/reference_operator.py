"""A reference for the parse benchmark: the least a third-party operator taking a definition can be.

One module, one templated dict argument, no validation, no extra links: what any provider's
operator pays in Airflow 3's fork model beyond an ``EmptyOperator`` (whose module the DAG
processor pre-imports, being ``airflow.*``), so the benchmark shows how much of
``HeteroTrainingOperator``'s cost is its own.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator


class DictOperator(BaseOperator):
    """Takes ``job`` (a templated dict) and does nothing with it."""

    template_fields = ("job",)

    def __init__(self, *, job: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.job = job

    def execute(self, context: Any) -> None:
        """Nothing to run: only parsing is measured."""
