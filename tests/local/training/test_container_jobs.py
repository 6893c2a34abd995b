"""Container jobs (``ContainerEntrypoint``, as SDK v3 sends them) and file modes of script-mode sources.

A container job's command runs on every host as given, with the host's own folder as ``/opt/ml``
(a mount namespace per host), no toolkit variables and no toolkit banner; its code comes through
channels. Script-mode sources keep their file modes, so an executable ``train.sh`` and the helper it
calls both run.
"""

from __future__ import annotations

import io
import json
import tarfile
import textwrap
from pathlib import Path
from typing import Any

import pytest
from support.local_jobkit import BUCKET, channel, log_lines, request, unique, wait

from airflow_hetero.local import LocalEndpoint
from airflow_hetero.local.host import process
from airflow_hetero.local.training import runner

pytestmark = pytest.mark.slow

#: Every host writes what it sees under /opt/ml into its model dir (no toolkit: read the config file).
CONTAINER_SCRIPT = textwrap.dedent(
    """
    import json, os
    config = json.load(open("/opt/ml/input/config/resourceconfig.json"))
    host = config["current_host"]
    seen = {"group": config["current_group_name"], "cwd": os.getcwd(),
            "channels": sorted(os.listdir("/opt/ml/input/data")),
            "toolkit": sorted(k for k in os.environ if k.startswith("SM_")),
            "base_dir": os.environ.get("SAGEMAKER_BASE_DIR"), "job": os.environ["TRAINING_JOB_NAME"]}
    with open(f"/opt/ml/model/{host}.json", "w") as f:
        json.dump(seen, f)
    print(f"container host {host} ok")
    """
)


def container_request(name: str, code_uri: str, **spec: Any) -> dict[str, Any]:
    """A two-group container job: code in a ``code`` channel for every group, ``train`` for ``data``."""
    body = request(name, "unused", channels=[channel("code", code_uri), channel("train", code_uri, ["data"])])
    body["InputDataConfig"][0]["DataSource"]["S3DataSource"]["InstanceGroupNames"] = ["data", "dnn"]
    body["HyperParameters"] = {"epochs": "2"}  # v3 style: raw strings, no sagemaker_* keys
    body["AlgorithmSpecification"].update(spec)
    return body


def _model(s3: Any, job: str) -> dict[str, Any]:
    data = s3.get_object(Bucket=BUCKET, Key=f"output/{job}/output/model.tar.gz")["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name.lstrip("./"): json.load(tar.extractfile(m)) for m in tar.getmembers() if m.isfile()}  # type: ignore[arg-type]


def test_a_container_job_runs_its_entrypoint_on_every_host_with_its_own_opt_ml(
    endpoint: LocalEndpoint, sm: Any, s3: Any, logs: Any
) -> None:
    job = unique("container")
    s3.put_object(Bucket=BUCKET, Key=f"{job}/code/run.py", Body=CONTAINER_SCRIPT.encode())
    spec = {"ContainerEntrypoint": ["/bin/sh"], "ContainerArguments": ["-c", "python3 /opt/ml/input/data/code/run.py"]}
    sm.create_training_job(**container_request(job, f"s3://{BUCKET}/{job}/code/", **spec))
    described = wait(sm, job)
    assert described["TrainingJobStatus"] == "Completed", described.get("FailureReason")
    assert described["AlgorithmSpecification"]["ContainerEntrypoint"] == ["/bin/sh"]
    hosts = {h["host"]: h["group"] for h in json.loads((endpoint.job_dir(job) / "hosts.json").read_text())}
    model = _model(s3, job)
    assert {name.removesuffix(".json"): seen["group"] for name, seen in model.items()} == hosts
    for seen in model.values():
        assert seen["cwd"] == "/opt/ml" and seen["job"] == job
        assert seen["toolkit"] == [] and seen["base_dir"] is None  # no toolkit in a container job
        assert seen["channels"] == (["code", "train"] if seen["group"] == "data" else ["code"])
    lines = log_lines(logs, job)
    assert len(lines) == 3
    for stream_lines in lines.values():  # no toolkit banner: the command's own output only
        assert not any(line.startswith("SM_") or "Training Env" in line for line in stream_lines)
        assert any(line.startswith("container host algo-") for line in stream_lines)


def test_container_arguments_without_an_entrypoint_fail_the_job(sm: Any, s3: Any) -> None:
    job = unique("noentry")
    s3.put_object(Bucket=BUCKET, Key=f"{job}/code/run.py", Body=b"print(1)\n")
    sm.create_training_job(**container_request(job, f"s3://{BUCKET}/{job}/code/", ContainerArguments=["-c", "true"]))
    described = wait(sm, job)
    assert described["TrainingJobStatus"] == "Failed"
    assert described["FailureReason"].startswith(
        "ClientError: AlgorithmSpecification.ContainerArguments needs ContainerEntrypoint on the local endpoint"
    )


def test_without_a_mount_namespace_the_job_fails_before_any_host_starts(
    endpoint: LocalEndpoint, sm: Any, s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the reason text is the shim's own (tests/local/host/test_host_namespace.py makes it for real)
    monkeypatch.setattr(runner, "opt_ml_problem", lambda directory: "neither is available here (...)")
    job = unique("nons")
    s3.put_object(Bucket=BUCKET, Key=f"{job}/code/run.py", Body=b"print(1)\n")
    spec = {"ContainerEntrypoint": ["/bin/sh"], "ContainerArguments": ["-c", "true"]}
    sm.create_training_job(**container_request(job, f"s3://{BUCKET}/{job}/code/", **spec))
    described = wait(sm, job)
    assert described["TrainingJobStatus"] == "Failed"
    assert described["FailureReason"] == (
        "ClientError: The local endpoint runs a ContainerEntrypoint on every host with the host's own folder as "
        "/opt/ml, which needs a mount namespace: run the endpoint as root, or where unprivileged user namespaces "
        "are allowed. neither is available here (...). No host was started."
    )
    assert not (endpoint.job_dir(job) / "hosts.json").exists()


def test_the_namespace_check_passes_here(tmp_path: Path) -> None:
    assert process.opt_ml_problem(tmp_path) is None


def _tarball(files: dict[str, tuple[str, int]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, (text, mode) in files.items():
            data = textwrap.dedent(text).encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_an_executable_train_sh_and_the_helper_it_calls_both_run(sm: Any, s3: Any, logs: Any) -> None:
    job = unique("trainsh")
    source = _tarball(
        {
            "train.sh": ('#!/bin/sh\nset -e\n./bin/helper.sh "$@"\n', 0o755),
            "bin/helper.sh": ('#!/bin/sh\necho "helper ran on $SM_CURRENT_HOST with $*"\n', 0o755),
        }
    )
    s3.put_object(Bucket=BUCKET, Key=f"{job}/source/sourcedir.tar.gz", Body=source)
    body = request(job, f"s3://{BUCKET}/{job}/source/sourcedir.tar.gz", program="train.sh", hyperparameters={"lr": 0.1})
    sm.create_training_job(**body)
    described = wait(sm, job)
    assert described["TrainingJobStatus"] == "Completed", described.get("FailureReason")
    ran = [line for lines in log_lines(logs, job).values() for line in lines if line.startswith("helper ran on")]
    assert sorted(ran) == [f"helper ran on algo-{n} with --lr 0.1" for n in (1, 2, 3)]
