"""What a spot interruption leaves behind: nothing of the interrupted run but its checkpoints.

SageMaker restarts an interrupted job on new instances: no process of the last run survives it, and
of its files only what the checkpoint folder held comes back (from S3). The job's script starts a
daemon that ignores SIGTERM in a session of its own and writes a file outside its checkpoint folder;
the test waits for the daemon's pid to reach S3 (an event), interrupts the job, and checks that the
daemon is gone and that the second run found no trace of the first outside its checkpoints.
"""

from __future__ import annotations

import io
import json
import tarfile
import time
from typing import Any

import psutil
import pytest
from support.local_jobkit import BUCKET, put_source, request, unique, wait

from airflow_hetero.local import LocalEndpoint, SpotOptions

pytestmark = pytest.mark.slow

ENDPOINT_RUN = {"stop_grace": 1.0}
ENDPOINT_SPOT = SpotOptions(restart_delay=0.2, checkpoint_sync_interval=0.2)
SCRIPT = """
    import json, os, subprocess, sys, time
    from airflow_hetero import runtime
    folder = runtime.checkpoint_dir()
    runs = int((folder / "runs").read_text()) + 1 if (folder / "runs").exists() else 1
    (folder / "runs").write_text(str(runs))
    scratch = os.path.join(os.environ["SM_MODEL_DIR"], "scratch")
    found = os.path.exists(scratch)
    open(scratch, "w").write(str(runs))
    if runs == 1:  # a daemon deaf to SIGTERM in a new session, then wait for the interruption
        deaf = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
        daemon = subprocess.Popen([sys.executable, "-c", deaf], start_new_session=True)
        (folder / "daemon.pid").write_text(str(daemon.pid))
        time.sleep(600)
    json.dump({"runs": runs, "found_scratch": found}, open(os.path.join(os.environ["SM_MODEL_DIR"], "run.json"), "w"))
"""


def _daemon_pid(s3: Any, name: str) -> int | None:
    for obj in s3.list_objects_v2(Bucket=BUCKET, Prefix=f"checkpoints/{name}/").get("Contents", []):
        if obj["Key"].endswith("/daemon.pid"):
            return int(s3.get_object(Bucket=BUCKET, Key=obj["Key"])["Body"].read())
    return None


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_an_interrupted_run_leaves_no_process_and_no_file_but_its_checkpoints(
    endpoint: LocalEndpoint, sm: Any, s3: Any
) -> None:
    name = unique("spot-leftovers")
    body = request(name, put_source(s3, name, SCRIPT), groups=(("main", "ml.c5.xlarge", 1),), max_runtime=120)
    body["EnableManagedSpotTraining"] = True
    body["StoppingCondition"]["MaxWaitTimeInSeconds"] = 600
    body["CheckpointConfig"] = {"S3Uri": f"s3://{BUCKET}/checkpoints/{name}"}
    sm.create_training_job(**body)
    deadline = time.monotonic() + 60
    while (pid := _daemon_pid(s3, name)) is None:
        assert time.monotonic() < deadline, "the daemon's pid never reached the checkpoint S3Uri"
        time.sleep(0.05)
    assert _alive(pid)
    endpoint.interrupt(name)
    done = wait(sm, name, timeout=120)

    assert done["TrainingJobStatus"] == "Completed", done.get("FailureReason")
    assert [t["Status"] for t in done["SecondaryStatusTransitions"]].count("Interrupted") == 1
    assert not _alive(pid)  # the first run's daemon went with its instance
    key = done["ModelArtifacts"]["S3ModelArtifacts"].removeprefix(f"s3://{BUCKET}/")
    with tarfile.open(fileobj=io.BytesIO(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())) as tar:
        member = tar.extractfile("run.json")
        assert member is not None
        run = json.load(member)
    assert run == {"runs": 2, "found_scratch": False}  # resumed from the checkpoint, on a fresh /opt/ml
