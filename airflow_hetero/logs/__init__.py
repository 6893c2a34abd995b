"""Logs of a training job: reading streams, mapping hosts to instance groups, per-group summaries.

Pure core: :mod:`~airflow_hetero.logs.streams` (per-stream accumulation), :mod:`~.mapping`
(host -> group), :mod:`~.shape` (the summary's keys, as TypedDicts), :mod:`~.summary`,
:mod:`~.size_limit` and :mod:`~.table` (the summary, its XCom bound, its task-log table). The
modules that call AWS take the boto3 clients they are given and import neither boto3 nor Airflow:
:mod:`~.cloudwatch` (read logs and metrics), :mod:`~.tail` (live tail), :mod:`~.summarize`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_hetero import lazy_exports

if TYPE_CHECKING:
    from airflow_hetero.logs.per_group import CostSpec, SeriesSpec, VerdictSpec
    from airflow_hetero.logs.summarize import summarize_training_job
    from airflow_hetero.logs.verdict import Thresholds

__all__ = ["CostSpec", "SeriesSpec", "Thresholds", "VerdictSpec", "summarize_training_job"]

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "summarize_training_job": "airflow_hetero.logs.summarize",
        # what summarize_training_job's series=, verdict= and cost= take
        "SeriesSpec": "airflow_hetero.logs.per_group",
        "VerdictSpec": "airflow_hetero.logs.per_group",
        "CostSpec": "airflow_hetero.logs.per_group",
        "Thresholds": "airflow_hetero.logs.verdict",
    },
)
