"""The example retraining DAG as the system test schedules it: three weekly runs, one after the other.

``system_retraining`` is airflow_hetero/example_dags/hetero_retraining_dag.py's DAG: the same
``week -> train -> summarize -> gate``, the same timetable and gate, and the same job definition file
``hetero_retraining/job.yaml`` with its code folder, both the installed package's own (the system test
links ``hetero_retraining/`` of this folder to the installed example's). It differs only where the
system test needs it to, each for a reason:

* **Three past weeks, in order, unpaused by the test.** ``catchup`` over 2026-01-04 .. 2026-01-18
  (``end_date``: exactly three runs), ``max_active_runs=1`` (right-sizing reads the runs before), paused
  at creation: the test seeds each week's data first, then unpauses it, and the scheduler runs the
  three while the other system tests run (tests/support/system_retraining.py).
* **Right-sizing in apply mode, made deterministic** as tests/dags/test_rightsizing_dag.py does: the
  summary divides the training group's CPU figure by 1000 vCPUs (``capacity_overrides``), and with the
  verdict's thresholds at 0.5 % (waiting) and 1 % (busy) the data hosts (whose start-up alone keeps their
  CPU well above 1 %) are the bottleneck whatever the load. ``agree_runs=1`` and ``objective="time"``: one
  run on the planned cluster is enough evidence, prices do not weigh, so the run after it grows
  data_group (2 -> 4, one step).
* **A capacity fallback in the first run.** The system endpoint starts without ml.g5.xlarge capacity
  (the type of job.yaml's training group; the other system DAGs use another type), as ``make demo``'s
  does: the first run's job falls back to ml.g5.2xlarge. The test gives the capacity back once that
  first attempt failed, so the next two runs run the cluster planned (a fallback run is no right-sizing
  evidence).
* **The system's connection** (``aws_system``), a 2-second poll, and no retries (a failed task shows at
  once, not two retry delays later).
"""

from __future__ import annotations

from typing import Any

import pendulum
from airflow.providers.common.compat.sdk import DAG, AirflowFailException, Asset, task
from airflow.timetables.interval import CronDataIntervalTimetable

from airflow_hetero.operators import HeteroLogSummaryOperator, HeteroTrainingOperator

CONN = "aws_system"
MODEL = Asset("s3://airflow-hetero-demo/models")
#: The data hosts' figures as measured (1 vCPU), the training host's divided by 1000: see the docstring.
CAPACITY = {"cpus": 1000, "gpus": 1}
OVERRIDES = {"ml.c5.xlarge": {"cpus": 1, "gpus": 0}, "ml.g5.xlarge": CAPACITY, "ml.g5.2xlarge": CAPACITY}
THRESHOLDS = {"idle_percent": 0.5, "waiting_percent": 0.5, "busy_percent": 1, "target_percent": 20}

with DAG(
    dag_id="system_retraining",
    description="The example weekly retraining, three past weeks, right-sized (tests/system)",
    schedule=CronDataIntervalTimetable("0 0 * * 0", timezone="UTC"),
    start_date=pendulum.datetime(2026, 1, 4, tz="UTC"),
    end_date=pendulum.datetime(2026, 1, 18, tz="UTC"),
    catchup=True,
    max_active_runs=1,
    is_paused_upon_creation=True,
    default_args={"retries": 0},
    params={"max_final_loss": 0.05},
    tags=["sagemaker", "heterogeneous-cluster", "system-test"],
) as dag:

    @task(retries=0)
    def week(**context: Any) -> str:
        """The first day (YYYY-MM-DD) of the week of data to train on."""
        start = context.get("data_interval_start")
        if start is None:  # Airflow 3 manual run without a logical date: the week before run_after
            start = dag.timetable.infer_manual_data_interval(run_after=context["dag_run"].run_after).start
        return f"{start:%Y-%m-%d}"

    train = HeteroTrainingOperator(
        task_id="train",
        job="hetero_retraining/job.yaml",
        aws_conn_id=CONN,
        deferrable=True,
        check_interval=2,
        model_asset=MODEL,
        rightsizing={
            "groups": {"data_group": {"min_count": 1, "max_count": 8}},
            "mode": "apply",
            "objective": "time",
            "agree_runs": 1,
        },
    )
    summarize = HeteroLogSummaryOperator(
        task_id="summarize",
        training_task_id="train",
        trigger_rule="all_done",
        aws_conn_id=CONN,
        verdict_thresholds=THRESHOLDS,
        capacity_overrides=OVERRIDES,
    )

    @task(retries=0)
    def gate(summary: dict[str, Any], params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Fail the run when training did not converge or any instance group logged errors."""
        if summary.get("status") != "Completed":  # summarize ran after a failed train too (all_done)
            name, status = summary["training_job_name"], summary.get("status")
            raise AirflowFailException(f"training job {name} ended {status}: {summary.get('failure_reason')}")
        limit = float((params or {}).get("max_final_loss", 0.05))
        problems = [
            f"group {name} logged {g['errors']} error(s)" for name, g in summary["groups"].items() if g["errors"]
        ]
        loss = summary["groups"].get("train_group", {}).get("metrics", {}).get("train:loss", {}).get("last")
        if loss is None:
            problems.append("the training group reported no train:loss metric")
        elif loss > limit:
            problems.append(f"final train:loss {loss} is above {limit}")
        if problems:
            raise AirflowFailException("model rejected: " + "; ".join(problems))  # retrying cannot help
        return {"training_job_name": summary["training_job_name"], "final_loss": loss}

    week() >> train >> summarize
    gate(summarize.output)
