"""Helpers for end-to-end tests against a real LocalEndpoint: source tarballs, requests, waiting.

Requests are written as plain dicts, exactly the CreateTrainingJob kwargs the SDK would send
(hyperparameter values JSON-encoded strings).
"""

from __future__ import annotations

import io
import itertools
import json
import tarfile
import textwrap
import time
from typing import Any

BUCKET = "local-endpoint-tests"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
TERMINAL = ("Completed", "Failed", "Stopped")
_counter = itertools.count(1)


def unique(prefix: str) -> str:
    """A job name no other test uses."""
    return f"{prefix}-{int(time.time()) % 100000}-{next(_counter)}"


def tarball(files: dict[str, str], members: list[tarfile.TarInfo] | None = None) -> bytes:
    """A gzipped source tarball of ``files`` (text dedented) plus raw ``members``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in files.items():
            data = textwrap.dedent(text).encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for member in members or []:
            tar.addfile(member, io.BytesIO(b"x" * member.size))
    return buffer.getvalue()


def put_source(s3: Any, job: str, script: str, **more: str) -> str:
    """Upload a source tarball with ``train.py`` = ``script``; return its S3 URI."""
    key = f"{job}/source/sourcedir.tar.gz"
    s3.put_object(Bucket=BUCKET, Key=key, Body=tarball({"train.py": script, **more}))
    return f"s3://{BUCKET}/{key}"


def channel(name: str, uri: str, groups: list[str] | None = None, *, sharded: bool = False) -> dict[str, Any]:
    """An InputDataConfig channel on an S3 prefix."""
    source: dict[str, Any] = {
        "S3DataType": "S3Prefix",
        "S3Uri": uri,
        "S3DataDistributionType": "ShardedByS3Key" if sharded else "FullyReplicated",
    }
    if groups:
        source["InstanceGroupNames"] = groups
    return {"ChannelName": name, "DataSource": {"S3DataSource": source}}


def request(
    name: str,
    source: str,
    *,
    groups: tuple[tuple[str, str, int], ...] = (("data", "ml.c5.xlarge", 2), ("dnn", "ml.p3.2xlarge", 1)),
    channels: list[dict[str, Any]] | None = None,
    hyperparameters: dict[str, Any] | None = None,
    max_runtime: int = 60,
    program: str = "train.py",
) -> dict[str, Any]:
    """CreateTrainingJob kwargs for a heterogeneous script-mode job."""
    hps = {k: json.dumps(v) for k, v in (hyperparameters or {}).items()}
    hps.update(
        {
            "sagemaker_program": json.dumps(program),
            "sagemaker_submit_directory": json.dumps(source),
            "sagemaker_container_log_level": "20",
            "sagemaker_job_name": json.dumps(name),
            "sagemaker_region": json.dumps("us-east-1"),
        }
    )
    body: dict[str, Any] = {
        "TrainingJobName": name,
        "RoleArn": ROLE,
        "AlgorithmSpecification": {
            "TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.1-cpu-py310",
            "TrainingInputMode": "File",
        },
        "HyperParameters": hps,
        "OutputDataConfig": {"S3OutputPath": f"s3://{BUCKET}/output"},
        "ResourceConfig": {
            "InstanceGroups": [{"InstanceGroupName": g, "InstanceType": t, "InstanceCount": c} for g, t, c in groups],
            "VolumeSizeInGB": 30,
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": max_runtime},
    }
    if channels:
        body["InputDataConfig"] = channels
    return body


def wait(
    sm: Any, name: str, *, until: tuple[str, ...] = TERMINAL, secondary: str | None = None, timeout: float = 30.0
) -> dict[str, Any]:
    """Poll DescribeTrainingJob until the status is in ``until`` (or SecondaryStatus == ``secondary``)."""
    deadline = time.monotonic() + timeout
    while True:
        described: dict[str, Any] = sm.describe_training_job(TrainingJobName=name)
        if secondary is not None and described["SecondaryStatus"] == secondary:
            return described
        if secondary is None and described["TrainingJobStatus"] in until:
            return described
        if described["TrainingJobStatus"] in TERMINAL or time.monotonic() > deadline:
            raise AssertionError(f"job {name} did not reach {secondary or until}: {described}")
        time.sleep(0.05)


def host_metric_names(cloudwatch: Any, job: str, host: str) -> set[str]:
    """Names of the metrics put for one host of ``job`` (its utilisation figures)."""
    dimensions = [{"Name": "Host", "Value": f"{job}/{host}"}]
    found = cloudwatch.list_metrics(Namespace="/aws/sagemaker/TrainingJobs", Dimensions=dimensions)["Metrics"]
    return {m["MetricName"] for m in found}


def log_lines(logs: Any, job: str) -> dict[str, list[str]]:
    """Stream name -> messages of every log stream of ``job`` (none while the log group is not created)."""
    group = "/aws/sagemaker/TrainingJobs"
    try:
        streams = logs.describe_log_streams(logGroupName=group, logStreamNamePrefix=f"{job}/")["logStreams"]
    except logs.exceptions.ResourceNotFoundException:
        return {}
    result: dict[str, list[str]] = {}
    for stream in streams:
        events = logs.get_log_events(logGroupName=group, logStreamName=stream["logStreamName"], startFromHead=True)[
            "events"
        ]
        result[stream["logStreamName"]] = [e["message"] for e in events]
    return result


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    import psutil

    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False
