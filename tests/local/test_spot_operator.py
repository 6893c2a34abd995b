"""The operator runs a managed spot job on the offline endpoint: interrupted twice, it gives the model an
uninterrupted run gives; stopped at MaxWaitTimeInSeconds, it fails the task saying so.

The job is the example DAG's (``example_dags/hetero_retraining``): two data hosts stream batches, a
trainer fits a linear model and checkpoints its weights after every epoch (``epoch_pause`` slows the
epochs). An :class:`Interrupter` thread watches the job from outside, as EC2 would take the capacity
back: it interrupts once the trainer's first checkpoint is in S3, and again once the restarted trainer
has saved a later epoch. Nothing waits for a time.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import tarfile
import threading
import time
from collections.abc import Iterator
from typing import Any
from unittest.mock import MagicMock

import pytest
from support.example_jobs import Group, example_job
from support.local_jobkit import BUCKET

from airflow_hetero import demo, example_dags
from airflow_hetero._compat import TaskDeferred
from airflow_hetero.job.outcome import TrainingJobLimitError
from airflow_hetero.local import LocalEndpoint, SpotOptions
from airflow_hetero.operators import HeteroTrainingOperator

pytestmark = pytest.mark.slow

ENDPOINT_RUN = {"stop_grace": 1.0, "metrics_interval": 0.5}
ENDPOINT_SPOT = SpotOptions(restart_delay=0.3, checkpoint_sync_interval=0.3)
CONN_ID = "hetero_spot_endpoint"
CODE = example_dags.folder() / "hetero_retraining" / "code"
EPOCHS = 6


@pytest.fixture
def conn(endpoint: LocalEndpoint, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalEndpoint]:
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", endpoint.airflow_connection_json())
    yield endpoint


@pytest.fixture(scope="module", autouse=True)
def data(endpoint: LocalEndpoint) -> None:
    """The example's two channels: four raw CSV parts (sharded over the data hosts) and the feature stats."""
    rows = demo.make_rows(400)
    s3 = endpoint.client("s3")
    for part in range(4):
        buffer = io.StringIO()
        csv.writer(buffer).writerows(rows[part::4])
        s3.put_object(Bucket=BUCKET, Key=f"raw/part-{part}.csv", Body=buffer.getvalue().encode())
    s3.put_object(Bucket=BUCKET, Key="config/features.json", Body=json.dumps(demo.feature_stats(rows)).encode())


def definition(base: str, *, spot: bool, epoch_pause: float = 1.0, max_run: int = 600) -> dict[str, Any]:
    job = example_job(
        base,
        framework_version="2.1",
        source_dir=str(CODE),
        output_path=f"s3://{BUCKET}/output",
        groups=[Group("data_group", "ml.c5.xlarge", 2), Group("train_group", "ml.g5.xlarge")],
        hyperparameters={"epochs": EPOCHS, "batch_size": 32, "epoch_pause": epoch_pause},
        max_run=max_run,
        inputs={
            "raw": {
                "s3_data": f"s3://{BUCKET}/raw/",
                "distribution": "ShardedByS3Key",
                "instance_groups": ["data_group"],
            },
            "config": {"s3_data": f"s3://{BUCKET}/config/"},
        },
    )
    if spot:
        job.update(use_spot_instances=True, max_wait=max_run, checkpoint_s3_uri=f"s3://{BUCKET}/checkpoints/{base}")
    return job


def operator(base: str, *, deferrable: bool = False, **kwargs: Any) -> HeteroTrainingOperator:
    return HeteroTrainingOperator(
        task_id="train",
        job=definition(base, **kwargs),
        aws_conn_id=CONN_ID,
        check_interval=0.2,
        deferrable=deferrable,
        print_log=False,
    )


def context(run_id: str) -> dict[str, Any]:
    return {"ti": MagicMock(dag_id="spot", task_id="train", run_id=run_id, map_index=-1), "params": {}}


def run(op: HeteroTrainingOperator, base: str, deferrable: bool, **kwargs: Any) -> dict[str, Any]:
    """The task: ``execute`` (sync), or ``execute``, the trigger and ``execute_complete`` of a new worker."""
    ctx = context(base)
    if not deferrable:
        result: dict[str, Any] = op.execute(ctx)
        return result
    with pytest.raises(TaskDeferred) as info:
        op.execute(ctx)
    event = asyncio.run(asyncio.wait_for(anext(info.value.trigger.run()), 300))
    result = operator(base, deferrable=True, **kwargs).execute_complete(ctx, event.payload, **(info.value.kwargs or {}))
    return result


def trained_epoch(s3: Any, base: str) -> int:
    """The last epoch the trainer's checkpoint in S3 holds (0: none yet)."""
    found = s3.list_objects_v2(Bucket=BUCKET, Prefix=f"checkpoints/{base}/train_group/").get("Contents", [])
    for obj in found:
        if obj["Key"].endswith("/state.json"):
            return int(json.loads(s3.get_object(Bucket=BUCKET, Key=obj["Key"])["Body"].read())["epoch"])
    return 0


class Interrupter(threading.Thread):
    """Interrupts the job named ``base...`` twice: after its first saved epoch, then once the restarted job has
    saved a later one than it resumed from. ``at``: the epoch each restart resumes from."""

    def __init__(self, endpoint: LocalEndpoint, base: str) -> None:
        super().__init__(name=f"interrupter-{base}", daemon=True)
        self.endpoint, self.base = endpoint, base
        self.done = threading.Event()
        self.at: list[int] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            sm, s3 = self.endpoint.client("sagemaker"), self.endpoint.client("s3")
            name = self._wait(lambda: self._job_name(sm))
            for count in (1, 2):
                after = self.at[-1] if self.at else 0
                self._wait(lambda after=after: self._training_beyond(sm, s3, name, after))
                self.endpoint.interrupt(name)
                self._wait(lambda count=count: self._interrupted(sm, name) == count)
                # the hosts' last checkpoints are copied before Interrupted: what the restart resumes from
                self.at.append(trained_epoch(s3, self.base))
        except BaseException as exc:  # the test reports it
            self.error = exc
        finally:
            self.done.set()

    def _job_name(self, sm: Any) -> str | None:
        jobs = sm.list_training_jobs(NameContains=self.base)["TrainingJobSummaries"]
        return str(jobs[0]["TrainingJobName"]) if jobs else None

    @staticmethod
    def _interrupted(sm: Any, name: str) -> int:
        transitions = sm.describe_training_job(TrainingJobName=name)["SecondaryStatusTransitions"]
        return sum(t["Status"] == "Interrupted" for t in transitions)

    def _training_beyond(self, sm: Any, s3: Any, name: str, after: int) -> int | None:
        epoch = trained_epoch(s3, self.base)
        training = sm.describe_training_job(TrainingJobName=name)["SecondaryStatus"] == "Training"
        return epoch if training and epoch > after else None

    @staticmethod
    def _wait(check: Any, timeout: float = 120.0) -> Any:
        deadline = time.monotonic() + timeout
        while (found := check()) in (None, False):
            if time.monotonic() > deadline:
                raise AssertionError("timed out")
            time.sleep(0.1)
        return found


def model(endpoint: LocalEndpoint, uri: str) -> dict[str, Any]:
    data = endpoint.client("s3").get_object(Bucket=BUCKET, Key=uri.removeprefix(f"s3://{BUCKET}/"))["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        member = tar.extractfile("model.json")
        assert member is not None
        loaded: dict[str, Any] = json.load(member)
        return loaded


@pytest.fixture(scope="module")
def uninterrupted(endpoint: LocalEndpoint) -> dict[str, Any]:
    """The model of the same job run on demand, never interrupted."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", endpoint.airflow_connection_json())
        result = run(operator("plain", spot=False, epoch_pause=0.0), "plain", False)
    assert result["status"] == "Completed"
    return model(endpoint, result["model_artifacts"])


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
def test_a_two_group_spot_job_interrupted_twice_gives_the_uninterrupted_model(
    conn: LocalEndpoint, uninterrupted: dict[str, Any], deferrable: bool
) -> None:
    base = f"spot-twice-{int(deferrable)}"
    interrupter = Interrupter(conn, base)
    interrupter.start()
    result = run(operator(base, deferrable=deferrable, spot=True), base, deferrable, spot=True)
    interrupter.done.wait(30)
    assert interrupter.error is None, interrupter.error
    assert len(interrupter.at) == 2 and interrupter.at[0] < interrupter.at[1] < EPOCHS + 1

    assert result["status"] == "Completed"
    described = conn.client("sagemaker").describe_training_job(TrainingJobName=result["training_job_name"])
    statuses = [t["Status"] for t in described["SecondaryStatusTransitions"]]
    assert statuses.count("Interrupted") == 2 and statuses.count("Restarting") == 2
    assert model(conn, result["model_artifacts"]) == uninterrupted  # the same weights, bias and loss
    assert result["billable_seconds"] < result["training_seconds"]
    logs = "\n".join(
        e["message"]
        for stream in conn.client("logs").describe_log_streams(
            logGroupName="/aws/sagemaker/TrainingJobs", logStreamNamePrefix=result["training_job_name"]
        )["logStreams"]
        for e in conn.client("logs").get_log_events(
            logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=stream["logStreamName"], startFromHead=True
        )["events"]
    )
    assert f"resumed from the checkpoint of epoch {interrupter.at[1]}" in logs  # not started over
    assert logs.count("preprocessed rows restored from the checkpoint") == 4  # 2 data hosts x 2 restarts


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
def test_a_spot_job_stopped_at_max_wait_fails_the_task_saying_so(conn: LocalEndpoint, deferrable: bool) -> None:
    """MaxWait counts wall time from creation, so with MaxWait = MaxRuntime it ends the job before MaxRuntime."""
    base = f"spot-maxwait-{int(deferrable)}"
    with pytest.raises(TrainingJobLimitError) as info:
        run(
            operator(base, deferrable=deferrable, spot=True, epoch_pause=30.0, max_run=8),
            base,
            deferrable,
            spot=True,
            epoch_pause=30.0,
            max_run=8,
        )
    message = str(info.value)
    assert "was stopped by SageMaker (MaxWaitTimeExceeded)" in message
    assert "MaxWaitTimeInSeconds = 8 s" in message and "raise max_wait" in message
