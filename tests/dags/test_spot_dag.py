"""A DAG's spot job under ``dag.test()``: the offline endpoint interrupts it after 3 s of training
(``SpotOptions.interrupt_after``; again, up to twice, should a host on a busy machine not have written its state by
then), every host resumes from its own checkpoint folder, and the task succeeds with a spot saving in its result."""

from __future__ import annotations

import io
import json
import tarfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.dag_files import dag_file
from support.example_jobs import Group, example_job

from airflow_hetero.local import LocalEndpoint, RunOptions, SpotOptions

pytestmark = pytest.mark.slow

BUCKET = "spot-dag"
SCRIPT = """\
import json, os, time
from airflow_hetero import runtime

env = runtime.environment()
state_file = runtime.checkpoint_dir() / "state.json"
state = json.loads(state_file.read_text()) if state_file.exists() else {"runs": 0, "steps": 0}
state["runs"] += 1
while state["runs"] == 1:  # the first run trains until it is interrupted; a restored one ends at once
    state_file.write_text(json.dumps(state))
    time.sleep(0.5)
    state["steps"] += 1
with open(os.path.join(os.environ["SM_MODEL_DIR"], env.current_host + ".json"), "w") as out:
    json.dump(state, out)
"""
DAG_FILE = textwrap.dedent(
    '''
    """A weekly job on spot capacity, checkpointing to S3."""
    from pathlib import Path

    import pendulum

    from airflow.providers.common.compat.sdk import DAG
    from airflow_hetero.operators import HeteroTrainingOperator

    JOB = {**@JOB@, "source_dir": str(Path(__file__).parent / "spot_code")}

    with DAG(
        "hetero_spot",
        schedule=None,
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        default_args={"retries": 0},
    ) as dag:
        HeteroTrainingOperator(task_id="train", job=JOB, check_interval=0.5, print_log=False)
    '''
).replace(
    "@JOB@",
    repr(
        example_job(
            "spot-dag",
            framework_version="2.1",
            source_dir=None,  # beside the DAG file: set in it
            output_path="s3://spot-dag/output",
            groups=[Group("data_group", "ml.c5.xlarge", 2), Group("train_group", "ml.g5.xlarge")],
            max_run=600,
            use_spot_instances=True,
            max_wait=1200,
            checkpoint_s3_uri="s3://spot-dag/checkpoints/weekly",
        )
    ),
)


@pytest.fixture
def endpoint(tmp_path: Path) -> Iterator[LocalEndpoint]:
    with LocalEndpoint(
        workdir=tmp_path / "endpoint",
        run=RunOptions(stop_grace=1.0, metrics_interval=0.5),
        spot=SpotOptions(interrupt_after=(3.0, 3.0, 3.0), restart_delay=0.2, checkpoint_sync_interval=0.2),
    ) as ep:
        ep.client("s3").create_bucket(Bucket=BUCKET)
        yield ep


@pytest.fixture
def dag_module(airflow_db: None, endpoint: LocalEndpoint, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from airflow.configuration import conf

    monkeypatch.setenv("AIRFLOW_CONN_AWS_DEFAULT", endpoint.airflow_connection_json())
    code = Path(conf.get("core", "dags_folder")) / "spot_code"
    code.mkdir(parents=True, exist_ok=True)
    (code / "train.py").write_text(SCRIPT)
    with dag_file("hetero_spot_dag", DAG_FILE) as module:
        yield module


def test_a_spot_job_interrupted_once_resumes_and_the_task_succeeds(dag_module: Any, endpoint: LocalEndpoint) -> None:
    dag_run = dag_module.dag.test()
    (ti,) = dag_run.get_task_instances()
    assert str(ti.state) == "success"
    result = ti.xcom_pull(task_ids="train")
    described = endpoint.client("sagemaker").describe_training_job(TrainingJobName=result["training_job_name"])
    statuses = [t["Status"] for t in described["SecondaryStatusTransitions"]]
    assert 1 <= statuses.count("Interrupted") <= 3 and statuses[-1] == "Completed"
    assert result["billable_seconds"] < result["training_seconds"]
    key = result["model_artifacts"].removeprefix(f"s3://{BUCKET}/")
    data = endpoint.client("s3").get_object(Bucket=BUCKET, Key=key)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        hosts = {m.name: json.load(tar.extractfile(m)) for m in tar.getmembers() if m.isfile()}  # type: ignore[arg-type]
    assert len(hosts) == 3 and all(s["runs"] >= 2 for s in hosts.values()), hosts
