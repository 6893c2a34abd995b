"""Runs of a weekly retraining as their XComs: what the training task ``train`` and its summary task ``summarize``
push, run after run, in the shapes the operators push them (the Runs view's benchmark and tests read them).

Run ``i`` of ``count`` (oldest first): the data group runs 2 instances until right-sizing (apply mode) moves it to
4 halfway, which shortens the run and cheapens it; every 7th run falls back to ``ml.g5.2xlarge`` for lack of
capacity; every 5th is a managed spot job with one interruption; every 6th waits in a Batch queue and is tried
twice; one run is stopped by its budget, one fails, one left no summary, one's summary was cut to its skeleton.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from airflow_hetero.plugins.runs_model import RunXComs

TRAIN, SUMMARY = "train", "summarize"
PRICES = {"ml.c5.xlarge": 0.204, "ml.g5.xlarge": 1.408, "ml.g5.2xlarge": 1.515}
FIRST_RUN = datetime(2026, 6, 7, tzinfo=UTC)
#: Points per utilisation series, as the summary keeps them by default.
SERIES_POINTS = 60
CAPACITY_ERROR = (
    "CapacityError: Unable to provision requested ML compute capacity. Please retry using a different ML instance type."
)


def _series(busy: float) -> dict[str, Any]:
    line = [round(busy + (i % 7) - 3, 1) for i in range(SERIES_POINTS)]
    return {
        "start": "2026-06-07T00:00:00.000Z",
        "start_epoch": 0.0,
        "step_seconds": 10,
        "points": SERIES_POINTS,
        "cpu": {"avg": line, "max": [v + 2 for v in line]},
        "memory": {"avg": [40.0] * SERIES_POINTS, "max": [41.0] * SERIES_POINTS},
    }


def _group(kind: str, count: int, seconds: float, busy: float) -> dict[str, Any]:
    return {
        "instance_type": kind,
        "instance_count": count,
        "devices": {"cpus": 4, "gpus": 1 if "g5" in kind else 0},
        "hosts": [f"algo-{i + 1}" for i in range(count)],
        "mapped_by": {},
        "log_streams": [],
        "events": 100,
        "bytes": 4000,
        "first_event": None,
        "last_event": None,
        "errors": 0,
        "warnings": 0,
        "error_samples": [],
        "tail": {},
        "metrics": {},
        "utilization": None,
        "instance_seconds": count * seconds,
        "series": _series(busy),
    }


def _cost(cluster: dict[str, tuple[str, int]], seconds: float, waiting: str, spot: bool) -> dict[str, Any]:
    ratio = 0.3 if spot else 1.0
    groups = {}
    for name, (kind, count) in cluster.items():
        billed = count * seconds * ratio
        waited = billed * 0.5 if name == waiting else 0.0
        groups[name] = {
            "instance_type": kind,
            "instance_count": count,
            "instance_seconds": billed,
            "price_per_hour": PRICES[kind],
            "cost": round(billed * PRICES[kind] / 3600, 4),
            "waiting_instance_seconds": waited,
            "waiting_cost": round(waited * PRICES[kind] / 3600, 4),
            **({"spot_saving": round(count * seconds * (1 - ratio) * PRICES[kind] / 3600, 4)} if spot else {}),
        }
    cost: dict[str, Any] = {
        "currency": "USD",
        "total": round(sum(g["cost"] for g in groups.values()), 4),
        "waiting": round(sum(g["waiting_cost"] for g in groups.values()), 4),
        "groups": groups,
        "prices": {
            kind: {"per_hour": PRICES[kind], "currency": "USD", "source": "override"} for kind, _ in cluster.values()
        },
        "estimate": spot,
        "spot": {"billable_seconds": int(seconds * ratio), "training_seconds": int(seconds), "ratio": ratio}
        if spot
        else None,
        "notes": [],
    }
    if spot:
        cost["spot_saving"] = round(sum(g["spot_saving"] for g in groups.values()), 4)
    return cost


def _verdict(data_count: int) -> dict[str, Any]:
    bound = data_count < 4
    message = (
        "train_group GPUs 38% busy while data_group CPUs are at 96%: data_group is the bottleneck; "
        "try 4 data_group instances"
        if bound
        else "Balanced: every group is busy (data_group CPUs 81%, train_group GPUs 78%)"
    )
    return {
        "kind": "bottleneck" if bound else "balanced",
        "bottleneck": "data_group" if bound else None,
        "message": message,
        "suggestion": {"group": "data_group", "instance_count": 4} if bound else None,
        "groups": {
            "data_group": {"state": "saturated" if bound else "busy"},
            "train_group": {"state": "waiting" if bound else "busy"},
        },
        "idle_groups": [],
        "over_provisioned_groups": [],
        "notes": [],
        "thresholds": {"busy_percent": 85, "waiting_percent": 50},
        "instance_seconds": None,
        "waiting_instance_seconds": None,
        "waiting_share": 0.25 if bound else 0.0,
    }


def _decision(run_id: str, data_count: int, changed: bool) -> dict[str, Any]:
    group = {
        "group": "data_group",
        "action": "changed" if changed else "kept",
        "count": 2 if changed else data_count,
        "next_count": data_count,
        "reason": "the last 2 runs say grow" if changed else "the last 2 runs do not agree",
        "signals": ["grow:4", "grow:4"],
        "figures": {},
        "type": "ml.c5.xlarge",
        "next_type": "ml.c5.xlarge",
    }
    return {
        "mode": "apply",
        "objective": "cost",
        "counts": {"data_group": data_count},
        "evidence": 2,
        "groups": [group],
        "run_id": run_id,
        "history": [],
        "blocked": {},
    }


def run_xcoms(index: int, count: int, first: datetime = FIRST_RUN) -> RunXComs:
    """Run ``index`` (0: the oldest) of ``count``: see the module docstring."""
    date = first + timedelta(days=7 * index)
    run_id = f"scheduled__{date:%Y-%m-%dT%H:%M:%S}+00:00"
    data_count = 2 if index < count // 2 else 4
    fallback, spot, queued = index % 7 == 3, index % 5 == 1, index % 6 == 2
    budget_stop, failed = index == count - 4, index == count - 6
    cluster = {
        "data_group": ("ml.c5.xlarge", data_count),
        "train_group": ("ml.g5.2xlarge" if fallback else "ml.g5.xlarge", 1),
    }
    seconds = 600.0 if data_count == 2 else 330.0
    job = f"hetero-retrain-{date:%Y%m%d}" + ("-1" if fallback else "")
    status = "Stopped" if budget_stop else "Failed" if failed else "Completed"
    values: dict[tuple[str, str], Any] = {
        (TRAIN, "training_job_name"): job,
        (TRAIN, "rightsizing"): _decision(run_id, data_count, index == count // 2),
    }
    attempts = (
        [
            {
                "job_name": job[:-2],
                "instance_groups": [
                    {"name": "data_group", "type": "ml.c5.xlarge", "count": data_count},
                    {"name": "train_group", "type": "ml.g5.xlarge", "count": 1},
                ],
                "reason": CAPACITY_ERROR,
            }
        ]
        if fallback
        else []
    )
    values[(TRAIN, "capacity_attempts")] = attempts
    if budget_stop:
        values[(TRAIN, "budget_stop")] = {
            "job_name": job,
            "message": f"SageMaker ended {job} at the runtime cap of 300 s that max_cost allowed",
        }
    service = {
        "job_id": f"id-{index}",
        "job_name": job,
        "job_queue": "arn:aws:batch:us-east-1:123456789012:job-queue/gpu-queue",
        "status": "SUCCEEDED",
        "attempts": [f"AWSBatch{job}a", f"AWSBatch{job}b"],
        "queued_seconds": 240.0,
    }
    if not (budget_stop or failed):
        values[(TRAIN, "return_value")] = {
            "training_job_name": job,
            "status": "Completed",
            "secondary_status": "Completed",
            "failure_reason": None,
            "instance_groups": [{"name": n, "type": t, "count": c} for n, (t, c) in cluster.items()],
            "billable_seconds": int(seconds * (0.3 if spot else 1)),
            "training_seconds": int(seconds),
            "capacity_attempts": attempts,
            **({"service_job": service} if queued else {}),
        }
    if queued:
        values[(TRAIN, "service_job")] = {k: service[k] for k in ("job_id", "job_name", "job_queue")}
    if index == 2:  # the summary task did not run
        return RunXComs(run_id, date.isoformat(), "failed", values)
    cost = _cost(cluster, seconds, "train_group" if data_count == 2 else "", spot)
    verdict = _verdict(data_count)
    summary: dict[str, Any] = {
        "training_job_name": job,
        "status": status,
        "secondary_status": "MaxRuntimeExceeded" if budget_stop else status,
        "failure_reason": "AlgorithmError: ExecuteUserScriptError: exit 1" if failed else None,
        "partial": False,
        "timeline": [
            {"status": s, "start": None, "end": None, "seconds": 1.0, "ongoing": False, "message": None}
            for s in (
                ["Starting", "Training", "Interrupted", "Restarting", "Training"] if spot else ["Starting", "Training"]
            )
        ],
        "billable_seconds": int(seconds * (0.3 if spot else 1)),
        "training_seconds": int(seconds),
        "groups": {n: _group(t, c, seconds, 96 if n == "data_group" else 38) for n, (t, c) in cluster.items()},
        "unmapped_hosts": [],
        "unmapped": None,
        "problems": [],
        "errors": 0,
        "warnings": 0,
        "truncated": {},
        "verdict": verdict,
        "cost": cost,
        **({"capacity_attempts": attempts} if attempts else {}),
    }
    if queued:
        summary["queue_attempts"] = {
            "service_job": job,
            "job_id": f"id-{index}",
            "job_queue": "gpu-queue",
            "currency": "USD",
            "attempts": [
                {"training_job": f"AWSBatch{job}a", "status": "Failed", "billable_seconds": 30, "cost": 0.01},
                {"training_job": job, "status": status, "billable_seconds": int(seconds), "cost": cost["total"]},
            ],
            "earlier_cost": 0.01,
            "total": round(cost["total"] + 0.01, 4),
        }
    if index == 5:  # cut to its skeleton by the size bound
        summary = {
            "training_job_name": job,
            "status": status,
            "secondary_status": status,
            "partial": False,
            "errors": 0,
            "warnings": 0,
            "failure_reason": None,
            "groups": {n: {"instance_count": c, "errors": 0} for n, (_, c) in cluster.items()},
            "truncated": {"bytes_before": 90000, "max_xcom_bytes": 48000},
        }
    else:
        values[(SUMMARY, "cost")] = cost
        values[(SUMMARY, "verdict")] = verdict
    values[(SUMMARY, "return_value")] = summary
    state = "failed" if budget_stop or failed else "success"
    return RunXComs(run_id, date.isoformat(), state, values)


def retraining_runs(count: int = 30, first: datetime = FIRST_RUN) -> list[RunXComs]:
    """``count`` runs a week apart from ``first``, newest first (as a page of the view holds them)."""
    return [run_xcoms(index, count, first) for index in reversed(range(count))]
