"""Weekly retraining on a SageMaker heterogeneous cluster.

week (which week of data) -> train (submits, waits in the triggerer, falls back to the training
group's other GPU type when SageMaker has no capacity; updates the model asset) -> summarize
(per-group logs, metrics, utilisation, cost and the capacity fallback) -> gate (fails the run when the
model or any group looks wrong). ``hetero_model_deploy_dag.py`` is scheduled on the model asset.

The job definition (``hetero_retraining/job.yaml``) templates its S3 prefixes from the week the
``week`` task picks: the run's data interval, or, for a manual run without a logical date
(Airflow 3's ``airflow dags trigger`` or REST with ``logical_date: null``), the week that ended
before the run. ``make demo`` runs this DAG against the offline endpoint; pointed at a real
account it runs on SageMaker unchanged. Runs on Airflow 2.11 and 3.x.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import pendulum
from airflow.providers.common.compat.sdk import DAG, AirflowFailException, Asset, task
from airflow.timetables.interval import CronDataIntervalTimetable

from airflow_hetero.operators import HeteroLogSummaryOperator, HeteroTrainingOperator

#: How often to check the job; the demo polls every few seconds, real jobs need less.
POLL_SECONDS = float(os.environ.get("HETERO_RETRAINING_POLL_SECONDS", "60"))
#: The job definition's output_path: every completed job is an event of this asset.
MODEL = Asset("s3://airflow-hetero-demo/models")

with DAG(
    dag_id="hetero_retraining",
    description="Weekly retraining on a heterogeneous cluster (CPU data group + GPU training group)",
    # weekly data intervals (Sunday to Sunday): each run trains on the week that just ended
    schedule=CronDataIntervalTimetable("0 0 * * 0", timezone="UTC"),
    start_date=pendulum.datetime(2026, 1, 5, tz="UTC"),
    catchup=False,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=2)},
    params={"max_final_loss": 0.05},
    tags=["sagemaker", "heterogeneous-cluster", "example"],
) as dag:

    @task(retries=0)
    def week(**context: Any) -> str:
        """The first day (YYYY-MM-DD) of the week of data to train on."""
        start = context.get("data_interval_start")
        if start is None:  # Airflow 3 manual run without a logical date: the week before run_after
            start = dag.timetable.infer_manual_data_interval(run_after=context["dag_run"].run_after).start
        return f"{start:%Y-%m-%d}"

    # The operator waits itself (in the triggerer): on a capacity failure it submits the next
    # cluster of job.yaml's fallback_instance_types, which a separate sensor could not.
    train = HeteroTrainingOperator(
        task_id="train",
        job="hetero_retraining/job.yaml",
        deferrable=True,
        check_interval=POLL_SECONDS,
        model_asset=MODEL,
    )
    # the job train ran and the clusters it tried before, whether it succeeded or failed: a failed job's
    # groups, logs and cost are what a person needs most (and what the Runs view shows of a failed run)
    summarize = HeteroLogSummaryOperator(task_id="summarize", training_task_id="train", trigger_rule="all_done")

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
