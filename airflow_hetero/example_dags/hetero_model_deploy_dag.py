"""Evaluate and deploy each model the retraining DAG produces: scheduled on the model asset.

``hetero_retraining``'s ``train`` task updates the asset ``s3://airflow-hetero-demo/models`` when its
training job completes; the event's extra carries the job name, the model artifact, the instance
groups and the job's final metrics. This DAG runs on each such event: ``evaluate`` accepts the
model when its final ``train:loss`` is low enough (SageMaker's final metric; a job that reported
none, as on the offline endpoint, is judged by the loss saved in its ``model.json``), and
``deploy`` copies the artifact to the ``deployed/`` prefix with a manifest next to it. Runs on
Airflow 2.11 and 3.x.
"""

from __future__ import annotations

import io
import json
import tarfile
from typing import Any

import pendulum
from airflow.providers.common.compat.sdk import DAG, AirflowFailException, Asset, task

#: The retraining job definition's output_path (see hetero_retraining/job.yaml).
MODEL = Asset("s3://airflow-hetero-demo/models")
DEPLOYED = "s3://airflow-hetero-demo/deployed/"


def latest_model_event(context: dict[str, Any]) -> dict[str, Any]:
    """The extra of the asset event this run is for: the triggering one, else the latest recorded."""
    triggering = context.get("triggering_asset_events") or context.get("triggering_dataset_events") or {}
    events = [event for batch in triggering.values() for event in batch]
    if not events:  # a manual run: the most recent model
        events = list(context["inlet_events"][MODEL])
    if not events:
        raise AirflowFailException(f"no event of {MODEL.uri} yet: run hetero_retraining first")
    return dict(events[-1].extra or {})


with DAG(
    dag_id="hetero_model_deploy",
    description="Evaluate and deploy each model hetero_retraining produces (scheduled on the model asset)",
    schedule=[MODEL],
    start_date=pendulum.datetime(2026, 1, 5, tz="UTC"),
    catchup=False,
    params={"max_final_loss": 0.05},
    tags=["sagemaker", "heterogeneous-cluster", "example"],
) as dag:

    @task(inlets=[MODEL], retries=0)
    def evaluate(params: dict[str, Any] | None = None, **context: Any) -> dict[str, Any]:
        """Accept the model when the job's final train:loss is at most params.max_final_loss."""
        from airflow.providers.amazon.aws.hooks.s3 import S3Hook

        model = latest_model_event(context)
        limit = float((params or {}).get("max_final_loss", 0.05))
        loss = (model.get("final_metrics") or {}).get("train:loss")
        model["loss_source"] = "final metric"
        if loss is None:  # the job reported no final metrics: read the loss the model saved
            bucket, key = S3Hook.parse_s3_url(model["model_artifacts"])
            body = S3Hook(aws_conn_id="aws_default").get_key(key, bucket).get()["Body"].read()
            with tarfile.open(fileobj=io.BytesIO(body)) as archive:
                member = archive.extractfile("model.json")
                saved = json.loads(member.read()) if member else {}
            loss, model["loss_source"] = saved.get("final_loss"), "model.json"
        if loss is None or loss > limit:
            raise AirflowFailException(f"model of {model.get('training_job_name')} rejected: train:loss {loss}")
        model["train_loss"] = loss
        return model

    @task(retries=0)
    def deploy(model: dict[str, Any]) -> str:
        """Copy the accepted artifact to deployed/ and write its manifest; return the deployed URI."""
        from airflow.providers.amazon.aws.hooks.s3 import S3Hook

        s3 = S3Hook(aws_conn_id="aws_default")
        bucket, key = S3Hook.parse_s3_url(model["model_artifacts"])
        target_bucket, prefix = S3Hook.parse_s3_url(DEPLOYED)
        s3.copy_object(key, f"{prefix}model.tar.gz", bucket, target_bucket)
        fields = ("training_job_name", "model_artifacts", "instance_groups", "final_metrics")
        fields += ("train_loss", "loss_source")
        manifest = {k: model.get(k) for k in fields}
        s3.load_string(json.dumps(manifest), f"{prefix}manifest.json", target_bucket, replace=True)
        return f"s3://{target_bucket}/{prefix}model.tar.gz"

    deploy(evaluate())
