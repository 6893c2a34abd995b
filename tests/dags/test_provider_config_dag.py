"""An Amazon provider ``config`` moved over unchanged (the class and the argument renamed), under
``dag.test()`` against the offline endpoint: its ``S3Operations`` create the bucket and upload the code
(as a ``.tar.gz``) and the data (as it is) from the DAG folder, its role *name* is expanded through
IAM, and the heterogeneous job trains on what was uploaded."""

from __future__ import annotations

import io
import tarfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.dag_files import dag_file

from airflow_hetero.local import LocalEndpoint, RunOptions

pytestmark = pytest.mark.slow

BUCKET = "provider-staging"
SCRIPT = """\
import os
from pathlib import Path

from airflow_hetero import runtime

env = runtime.environment()
if env.current_instance_group == "data_group":
    rows = (Path(os.environ["SM_CHANNEL_TRAIN"]) / "rows.csv").read_text().splitlines()
    print(f"{env.current_host}: {len(rows)} rows", flush=True)
else:
    Path(os.environ["SM_MODEL_DIR"], "model.txt").write_text("trained")
    print(f"{env.current_host}: model saved", flush=True)
"""
DAG_FILE = textwrap.dedent(
    f'''
    """The provider's SageMakerTrainingOperator config, given to HeteroTrainingOperator as it was."""
    import pendulum

    from airflow.providers.common.compat.sdk import DAG
    from airflow_hetero.operators import HeteroTrainingOperator

    CONFIG = {{
        "TrainingJobName": "provider-weekly",
        "RoleArn": "SageMakerRole",
        "S3Operations": {{
            "S3CreateBucket": [{{"Bucket": "{BUCKET}"}}],
            "S3Upload": [
                {{"Path": "provider_code", "Bucket": "{BUCKET}", "Key": "code/sourcedir.tar.gz", "Tar": True}},
                {{"Path": "provider_data/rows.csv", "Bucket": "{BUCKET}", "Key": "data/rows.csv", "Tar": False}},
            ],
        }},
        "AlgorithmSpecification": {{
            "TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.1-cpu-py310",
            "TrainingInputMode": "File",
        }},
        "HyperParameters": {{
            "sagemaker_program": '"train.py"',
            "sagemaker_submit_directory": '"s3://{BUCKET}/code/sourcedir.tar.gz"',
        }},
        "ResourceConfig": {{
            "InstanceGroups": [
                {{"InstanceGroupName": "data_group", "InstanceType": "ml.c5.xlarge", "InstanceCount": 2}},
                {{"InstanceGroupName": "train_group", "InstanceType": "ml.g5.xlarge", "InstanceCount": 1}},
            ],
            "VolumeSizeInGB": 30,
        }},
        "InputDataConfig": [
            {{
                "ChannelName": "train",
                "DataSource": {{
                    "S3DataSource": {{
                        "S3DataType": "S3Prefix",
                        "S3Uri": "s3://{BUCKET}/data",
                        "S3DataDistributionType": "FullyReplicated",
                        "InstanceGroupNames": ["data_group"],
                    }}
                }},
            }}
        ],
        "OutputDataConfig": {{"S3OutputPath": "s3://{BUCKET}/output"}},
        "StoppingCondition": {{"MaxRuntimeInSeconds": 600}},
    }}

    with DAG(
        "hetero_provider_config",
        schedule=None,
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        default_args={{"retries": 0}},
    ) as dag:
        HeteroTrainingOperator(task_id="train", request=CONFIG, check_interval=0.5)
    '''
)


@pytest.fixture
def endpoint(tmp_path: Path) -> Iterator[LocalEndpoint]:
    with LocalEndpoint(workdir=tmp_path / "endpoint", run=RunOptions(metrics_interval=0.3)) as ep:
        yield ep


@pytest.fixture
def dag_module(airflow_db: None, endpoint: LocalEndpoint, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from airflow.configuration import conf

    monkeypatch.setenv("AIRFLOW_CONN_AWS_DEFAULT", endpoint.airflow_connection_json())
    folder = Path(conf.get("core", "dags_folder"))
    for sub, name, text in (("provider_code", "train.py", SCRIPT), ("provider_data", "rows.csv", "1,2\n3,4\n5,6\n")):
        (folder / sub).mkdir(parents=True, exist_ok=True)
        (folder / sub / name).write_text(text)
    with dag_file("hetero_provider_config_dag", DAG_FILE) as module:
        yield module


def test_a_provider_config_runs_unchanged_with_its_uploads_and_role_name(
    dag_module: Any, endpoint: LocalEndpoint
) -> None:
    iam = endpoint.client("iam")
    try:
        role = iam.create_role(
            RoleName="SageMakerRole", AssumeRolePolicyDocument='{"Version": "2012-10-17", "Statement": []}'
        )["Role"]["Arn"]
    except iam.exceptions.EntityAlreadyExistsException:  # IAM is moto's, one per process: an earlier file made it
        role = iam.get_role(RoleName="SageMakerRole")["Role"]["Arn"]
    dag_run = dag_module.dag.test()
    (ti,) = dag_run.get_task_instances()
    assert str(ti.state) == "success"
    result = ti.xcom_pull(task_ids="train")
    sm, s3 = endpoint.client("sagemaker"), endpoint.client("s3")
    described = sm.describe_training_job(TrainingJobName=result["training_job_name"])
    assert described["TrainingJobStatus"] == "Completed"
    assert described["RoleArn"] == role  # the name, expanded
    code = s3.get_object(Bucket=BUCKET, Key="code/sourcedir.tar.gz")["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(code)) as tar:
        assert tar.getnames() == ["train.py"]  # the folder's entries at the root, as the provider tars
    logs = endpoint.client("logs")
    group, prefix = "/aws/sagemaker/TrainingJobs", result["training_job_name"] + "/"
    # this job's streams only (DescribeLogStreams answers 50 at most: the module's other jobs have streams too),
    # each read from its head, page by page
    pages = logs.get_paginator("describe_log_streams").paginate(logGroupName=group, logStreamNamePrefix=prefix)
    streams = [s["logStreamName"] for page in pages for s in page["logStreams"]]
    text = "\n".join(e["message"] for name in streams for e in _events(logs, group, name))
    assert text.count(": 3 rows") == 2 and "model saved" in text  # both data hosts read the uploaded rows
    model = result["model_artifacts"]
    assert model.startswith(f"s3://{BUCKET}/output/")


def _events(logs: Any, group: str, stream: str) -> list[dict[str, Any]]:
    """Every event of a stream, from its head (GetLogEvents ends when it returns the token it was given)."""
    events: list[dict[str, Any]] = []
    token: str | None = None
    for _ in range(1000):
        page = logs.get_log_events(
            logGroupName=group, logStreamName=stream, startFromHead=True, **({"nextToken": token} if token else {})
        )
        events += page["events"]
        if page.get("nextForwardToken") in (None, token):
            return events
        token = page["nextForwardToken"]
    raise AssertionError(f"{stream}: more than 1000 pages")
