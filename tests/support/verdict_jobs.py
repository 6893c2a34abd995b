"""A two-group job in moto whose hosts published chosen utilisation series: the verdict tests' and the view's data."""

from __future__ import annotations

from typing import Any

from airflow_hetero.runtime import format_marker
from support.log_jobs import DescribeOverride, create_job, put_stream, put_utilization, window

GROUPS = [("data_group", "ml.c5.18xlarge", 2), ("train_group", "ml.p4d.24xlarge", 1)]
HOSTS = {"algo-1": "data_group", "algo-3": "data_group", "algo-2": "train_group"}
VCPUS, GPUS = 72, 8  # ml.c5.18xlarge, ml.p4d.24xlarge


def put_job(aws: dict[str, Any], name: str, metrics: dict[str, dict[str, list[float]]]) -> DescribeOverride:
    """A 10-minute job (2 x c5.18xlarge feeding 1 x p4d.24xlarge) whose hosts published ``metrics``
    (host -> CloudWatch metric -> one value a minute, in percent per device); a SageMaker client
    whose DescribeTrainingJob gives it that training window and 600 billable seconds."""
    create_job(aws["sagemaker_client"], name, GROUPS)
    types = {g: t for g, t, _ in GROUPS}
    for host, group in HOSTS.items():
        put_stream(aws["logs_client"], f"{name}/{host}-1700000000", [format_marker(host, group, types[group]), "ok"])
    start, end = window(10)
    for host, by_metric in metrics.items():
        devices = VCPUS if HOSTS[host] == "data_group" else GPUS
        for metric, values in by_metric.items():
            scale = devices if metric in ("CPUUtilization", "GPUUtilization", "GPUMemoryUtilization") else 1
            if metric == "CPUUtilization" and HOSTS[host] == "train_group":
                scale = 96
            put_utilization(aws["cloudwatch_client"], name, host, metric, [v * scale for v in values], end)
    return DescribeOverride(
        aws["sagemaker_client"], TrainingStartTime=start, TrainingEndTime=end, BillableTimeInSeconds=600
    )


def flat(value: float, n: int = 10) -> list[float]:
    return [value] * n


def data_and_train(cpu: float, gpu: float) -> dict[str, dict[str, list[float]]]:
    return {
        "algo-1": {"CPUUtilization": flat(cpu), "MemoryUtilization": flat(40)},
        "algo-3": {"CPUUtilization": flat(cpu), "MemoryUtilization": flat(42)},
        "algo-2": {"CPUUtilization": flat(6), "GPUUtilization": flat(gpu), "GPUMemoryUtilization": flat(50)},
    }


def data_bound_with_jitter() -> dict[str, dict[str, list[float]]]:
    """The data-bound job of :func:`data_and_train` (CPU 96 %, GPU 38 % on average) with minute-to-minute
    variation, as a real job has: averages, and so the verdict, stay the same."""
    return {
        "algo-1": {"CPUUtilization": [94, 98, 95, 97, 96, 96, 93, 99, 96, 96], "MemoryUtilization": flat(40)},
        "algo-3": {"CPUUtilization": [97, 95, 96, 98, 94, 97, 96, 95, 97, 95], "MemoryUtilization": flat(42)},
        "algo-2": {
            "CPUUtilization": [5, 7, 6, 6, 5, 7, 6, 6, 5, 7],
            "GPUUtilization": [30, 46, 35, 41, 38, 38, 33, 43, 38, 38],
            "GPUMemoryUtilization": [48, 50, 51, 50, 49, 52, 50, 50, 50, 50],
        },
    }
