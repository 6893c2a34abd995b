"""Summaries of runs of a two-group job whose data group feeds its training group: what the summary operator
returns for a run, with the verdict :func:`airflow_hetero.logs.verdict.judge_groups` really gives it.

The model (also the offline training script's, tests/dags/test_rightsizing_dag.py): ``batches`` batches; a data
host prepares one in ``prep`` seconds, the training host trains on one in ``train`` seconds; ``n`` data hosts
share the batches. The run lasts ``batches x max(prep / n, train)`` seconds; each group is busy for the share of
it its own work takes. ``ratio`` = prep / train: the count at which neither group waits.
"""

from __future__ import annotations

from typing import Any

from airflow_hetero.job.rightsizing import record_of_summary
from airflow_hetero.logs.verdict import judge_groups

PRICES = {"ml.c5.xlarge": 0.204, "ml.g5.xlarge": 1.408}
#: The same, with the data group's other sizes (moves between types: docs/rightsizing.md).
SIZED_PRICES = {**PRICES, "ml.c5.large": 0.102, "ml.c5.2xlarge": 0.408, "ml.c5.4xlarge": 0.816}
DATA, TRAIN = "data_group", "train_group"


def _group(kind: str, count: int, busy: float, seconds: float) -> dict[str, Any]:
    stat = {"avg": round(busy, 2), "max": round(min(100.0, busy * 1.05), 2), "hosts": count, "datapoints": 20}
    return {
        "instance_type": kind,
        "instance_count": count,
        "devices": {"cpus": 1, "gpus": None},
        "utilization": {"cpu": stat, "memory": None, "gpu": None, "gpu_memory": None},
        "instance_seconds": round(count * seconds, 1),
    }


def summary(
    n: int,
    *,
    ratio: float,
    train_count: int = 1,
    status: str = "Completed",
    noise: float = 0.0,
    prices: dict[str, float] | None = None,
    slowdown: float = 1.0,
    name: str = "job",
    data_type: str = "ml.c5.xlarge",
    cpu_scale: float = 1.0,
) -> dict[str, Any]:
    """The summary of one run with ``n`` data hosts of ``data_type`` (``noise``: points added to the training
    group's utilisation; ``slowdown``: the run takes this many times longer than the model says, e.g. a slower
    host; ``cpu_scale``: the data hosts' utilisation is this many times the model's, e.g. half the vCPUs)."""
    batches, prep = 40, 0.2
    train = prep / ratio
    seconds = batches * max(prep / n, train) * slowdown
    data_busy = min(100.0, 100 * batches * prep / n / seconds * cpu_scale)
    train_busy = min(100.0, max(0.0, 100 * batches * train / seconds + noise))
    groups = {
        DATA: _group(data_type, n, data_busy, seconds),
        TRAIN: _group("ml.g5.xlarge", train_count, train_busy, seconds),
    }
    price = prices or SIZED_PRICES
    rate = n * price[data_type] + train_count * price["ml.g5.xlarge"]
    return {
        "training_job_name": name,
        "status": status,
        "billable_seconds": round(seconds, 1),
        "groups": groups,
        "verdict": judge_groups(groups, partial=False),
        "cost": {"total": round(rate * seconds / 3600, 6), "currency": "USD"},
    }


def record(
    n: int,
    *,
    fingerprint: str = "fp",
    run_id: str = "run",
    counts: dict[str, int] | None = None,
    types: dict[str, str] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """The record the summary task makes of :func:`summary`'s run (its decision asked for ``counts`` and
    ``types``: by default what it ran)."""
    decision: dict[str, Any] = {"fingerprint": fingerprint, "counts": counts if counts is not None else {DATA: n}}
    decision["types"] = types if types is not None else {DATA: kwargs.get("data_type", "ml.c5.xlarge")}
    return record_of_summary(summary(n, name=run_id, **kwargs), decision, run_id)
