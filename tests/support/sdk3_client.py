"""Drives the SageMaker Python SDK v3 (sagemaker-train) against the offline endpoint; run with its own venv.

``python sdk3_client.py WORKDIR SCENARIO...`` with ``AWS_ENDPOINT_URL``, fake credentials and region
in the environment (the settings docs/local.md gives). Prints one ``SDK3-RESULT`` JSON line of what
the SDK saw, which tests/local/test_sagemaker_sdk3.py checks. Public API only, as a user would
write it; the role is created (or its trust policy set) in the endpoint's IAM first, as it exists in an AWS account.
Scenarios: ``train`` (heterogeneous ``ModelTrainer.train(wait=True, logs=True)``), ``get-wait``
(``train(wait=False)`` then ``TrainingJob.get(name).wait()``), ``failed``, ``stopped``,
``torchrun`` (torchrun on one group through ``airflow_hetero.runtime``), ``fixture`` (the jobs
whose driver output tests/data/sdk3-drivers/ keeps, at SM_LOG_LEVEL 20 and 30).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import boto3
from sagemaker.core.helper.session_helper import Session
from sagemaker.core.resources import TrainingJob
from sagemaker.core.shapes import InstanceGroup, S3DataSource
from sagemaker.core.utils.exceptions import FailedStatusError
from sagemaker.train import ModelTrainer
from sagemaker.train.configs import Compute, InputData, OutputDataConfig, SourceCode

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
BUCKET = "sdk3-tests"
#: Seconds ``TrainingJob.wait`` waits for a job to end (its TimeoutExceededError fails the scenario); the
#: test's subprocess.run has a deadline of its own around the whole script.
JOB_TIMEOUT = 300
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5.1-cpu-py311"
TRUST = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}],
}
TRAIN = """
import json, os, sys, time
config = json.load(open("/opt/ml/input/config/resourceconfig.json"))
host, group = config["current_host"], config["current_group_name"]
print(f"[sdk3] host={host} group={group} cwd={os.getcwd()}", flush=True)
seen = {"group": group, "channels": sorted(os.listdir("/opt/ml/input/data")),
        "hp": os.environ.get("SM_HP_EPOCHS"), "helper": os.popen("sh helper.sh").read().strip()}
if os.environ.get("FAIL_GROUP") == group:
    print("something broke", file=sys.stderr, flush=True)
    sys.exit(3)
with open(f"/opt/ml/model/{host}.json", "w") as f:
    json.dump(seen, f)
time.sleep(float(os.environ.get("SLEEP", "0")))
"""
DDP = """
import json, os
config = json.load(open("/opt/ml/input/config/resourceconfig.json"))
host = config["current_host"]
if config["current_group_name"] != "dnn":  # the runtime runs this with plain Python outside the group
    with open(f"/opt/ml/model/{host}.json", "w") as f:
        json.dump({"torchrun": False}, f)
    raise SystemExit(0)
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
value = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(value)
with open(f"/opt/ml/model/{host}.json", "w") as f:
    json.dump({"rank": dist.get_rank(), "world": dist.get_world_size(), "sum": value.item(),
               "master": os.environ["MASTER_ADDR"]}, f)
dist.destroy_process_group()
"""


def source(workdir: Path, name: str, files: dict[str, str]) -> Path:
    """A source_dir with ``files`` (a ``*.sh`` file is made executable)."""
    folder = workdir / name
    folder.mkdir(parents=True, exist_ok=True)
    for file, text in files.items():
        (folder / file).write_text(text)
        if file.endswith(".sh"):
            (folder / file).chmod(0o755)
    return folder


def trainer(session: Session, src: Path, counts: tuple[int, int] = (2, 1), **extra: Any) -> ModelTrainer:
    """A ModelTrainer on two groups (``data``: c5, ``dnn``: p3) with a channel for ``data`` only."""
    groups = [
        InstanceGroup(instance_group_name="data", instance_type="ml.c5.xlarge", instance_count=counts[0]),
        InstanceGroup(instance_group_name="dnn", instance_type="ml.p3.2xlarge", instance_count=counts[1]),
    ]
    extra.setdefault("source_code", SourceCode(source_dir=str(src), entry_script="train.py"))
    return ModelTrainer(
        training_image=IMAGE,
        role=ROLE,
        sagemaker_session=session,
        base_job_name=extra.pop("base_job_name", "v3"),
        compute=Compute(instance_groups=groups),
        input_data_config=[
            InputData(
                channel_name="train",
                data_source=S3DataSource(
                    s3_uri=f"s3://{BUCKET}/data/", s3_data_type="S3Prefix", instance_group_names=["data"]
                ),
            )
        ],
        output_data_config=OutputDataConfig(s3_output_path=f"s3://{BUCKET}/models"),
        **extra,
    )


def model_files(job: TrainingJob) -> dict[str, Any]:
    """The JSON files of the job's model.tar.gz, by member name."""
    uri = job.model_artifacts.s3_model_artifacts
    bucket, key = uri.removeprefix("s3://").split("/", 1)
    data = boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name.lstrip("./"): json.load(tar.extractfile(m)) for m in tar.getmembers() if m.isfile()}


def summary(job: TrainingJob) -> dict[str, Any]:
    job.refresh()
    return {
        "name": job.training_job_name,
        "status": job.training_job_status,
        "secondary": job.secondary_status,
        "failure": None if not isinstance(job.failure_reason, str) else job.failure_reason,
    }


def run_train(session: Session, workdir: Path) -> dict[str, Any]:
    src = source(workdir, "train", {"train.py": TRAIN, "helper.sh": "#!/bin/sh\necho helper-ran\n"})
    model_trainer = trainer(session, src, hyperparameters={"epochs": 2})
    model_trainer.train(wait=True, logs=True)
    job = model_trainer._latest_training_job
    return {**summary(job), "model": model_files(job)}


def run_get_wait(session: Session, workdir: Path) -> dict[str, Any]:
    src = source(workdir, "train", {"train.py": TRAIN, "helper.sh": "#!/bin/sh\necho helper-ran\n"})
    model_trainer = trainer(session, src, counts=(1, 1), base_job_name="v3-get")
    model_trainer.train(wait=False)
    name = model_trainer._latest_training_job.training_job_name
    job = TrainingJob.get(name)
    job.wait(poll=1, timeout=JOB_TIMEOUT)
    return {**summary(job), "model": sorted(model_files(job))}


def run_failed(session: Session, workdir: Path) -> dict[str, Any]:
    src = source(workdir, "train", {"train.py": TRAIN, "helper.sh": "#!/bin/sh\necho helper-ran\n"})
    model_trainer = trainer(session, src, counts=(1, 1), base_job_name="v3-fail", environment={"FAIL_GROUP": "dnn"})
    try:
        model_trainer.train(wait=True, logs=False)
    except FailedStatusError as exc:
        return {**summary(model_trainer._latest_training_job), "raised": str(exc)}
    return {**summary(model_trainer._latest_training_job), "raised": None}


def run_stopped(session: Session, workdir: Path) -> dict[str, Any]:
    src = source(workdir, "train", {"train.py": TRAIN, "helper.sh": "#!/bin/sh\necho helper-ran\n"})
    model_trainer = trainer(session, src, counts=(1, 1), base_job_name="v3-stop", environment={"SLEEP": "120"})
    model_trainer.train(wait=False)
    job = TrainingJob.get(model_trainer._latest_training_job.training_job_name)
    deadline = time.monotonic() + 60
    while summary(job)["secondary"] != "Training" or not _wrote_model(job):
        assert time.monotonic() < deadline, summary(job)
        time.sleep(0.2)
    job.stop()
    job.wait(poll=1, timeout=JOB_TIMEOUT)  # v3 returns normally on Stopped: only Failed raises
    return {**summary(job), "model": sorted(model_files(job))}


def _wrote_model(job: TrainingJob) -> bool:
    """True once every host has printed its line (and so written its model file)."""
    logs = boto3.client("logs")
    streams = logs.describe_log_streams(
        logGroupName="/aws/sagemaker/TrainingJobs", logStreamNamePrefix=job.training_job_name + "/"
    )["logStreams"]
    printed = 0
    for stream in streams:
        events = logs.get_log_events(
            logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=stream["logStreamName"], startFromHead=True
        )["events"]
        printed += any(e["message"].startswith("[sdk3] host=") for e in events)
    return printed == 2


def run_torchrun(session: Session, workdir: Path, runtime_dir: str) -> dict[str, Any]:
    """torchrun on the dnn group only (2 hosts), through a copy of the runtime helper's folder."""
    src = source(workdir, "ddp", {"ddp.py": DDP})
    shutil.copytree(runtime_dir, src / "runtime", ignore=shutil.ignore_patterns("__pycache__"))
    environment = {
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
        "GLOO_SOCKET_IFNAME": "lo",
    }
    model_trainer = trainer(
        session,
        src,
        counts=(1, 2),
        base_job_name="v3-ddp",
        environment=environment,
        source_code=SourceCode(source_dir=str(src), command="python -m runtime torchrun --group dnn -- ddp.py"),
    )
    model_trainer.train(wait=True, logs=False)
    job = model_trainer._latest_training_job
    return {**summary(job), "model": model_files(job)}


def run_fixture(session: Session, workdir: Path) -> dict[str, Any]:
    """Two jobs whose host logs become tests/data/sdk3-drivers/ (SM_LOG_LEVEL 20, the default, and 30)."""
    src = source(workdir, "train", {"train.py": TRAIN, "helper.sh": "#!/bin/sh\necho helper-ran\n"})
    names = {}
    for level in ("20", "30"):
        environment = {"SM_LOG_LEVEL": level, "NCCL_DEBUG": "WARN", "LOG_LEVEL": "ERROR"}
        model_trainer = trainer(session, src, base_job_name=f"v3-log{level}", environment=environment)
        model_trainer.train(wait=True, logs=False)
        names[level] = model_trainer._latest_training_job.training_job_name
        time.sleep(1.1)  # v3 names jobs by the second
    return names


def main(workdir: Path, scenarios: list[str]) -> dict[str, Any]:
    iam = boto3.client("iam")
    try:
        iam.create_role(RoleName="SageMakerRole", AssumeRolePolicyDocument=json.dumps(TRUST))
    except iam.exceptions.EntityAlreadyExistsException:
        # moto's IAM is shared by every endpoint of a test process: an earlier test module may have
        # left a SageMakerRole that SageMaker may not assume, which the SDK's role check refuses
        iam.update_assume_role_policy(RoleName="SageMakerRole", PolicyDocument=json.dumps(TRUST))
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="data/part-0.txt", Body=b"1 2 3\n")
    session = Session(boto_session=boto3.Session(), default_bucket=BUCKET)
    seen: dict[str, Any] = {}
    for scenario in scenarios:
        started = time.monotonic()
        if scenario.startswith("torchrun="):
            seen["torchrun"] = run_torchrun(session, workdir, scenario.partition("=")[2])
        else:
            runner = {
                "train": run_train,
                "get-wait": run_get_wait,
                "failed": run_failed,
                "stopped": run_stopped,
                "fixture": run_fixture,
            }[scenario]
            seen[scenario] = runner(session, workdir)
        seen.setdefault("seconds", {})[scenario.partition("=")[0]] = round(time.monotonic() - started, 1)
        time.sleep(1.1)  # v3 names jobs by the second: the next job must not collide
    return seen


if __name__ == "__main__":
    print("SDK3-RESULT " + json.dumps(main(Path(sys.argv[1]), sys.argv[2:])), flush=True)
