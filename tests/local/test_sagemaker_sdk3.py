"""The SageMaker Python SDK v3 (sagemaker-train 1.27.0), unchanged, against the offline endpoint.

It runs in a venv of its own (.venv-sdk3, which ``make`` builds from tests/support/sdk3-requirements.txt):
a heterogeneous ``ModelTrainer.train(wait=True, logs=True)``, ``TrainingJob.get(name).wait()``, a
Failed and a Stopped job as v3 sees them, and torchrun on one instance group through a copy of
the ``airflow_hetero.runtime`` folder (a real torchrun, torch from that venv).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from airflow_hetero import runtime
from airflow_hetero.local import LocalEndpoint

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SDK3_PYTHON = ROOT / ".venv-sdk3" / "bin" / "python"
CLIENT = Path(__file__).parents[1] / "support" / "sdk3_client.py"
ENDPOINT_RUN = {"stop_grace": 2.0, "metrics_interval": 0.5, "log_flush_interval": 0.2}
SDK_CONFIG = "SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n      TelemetryOptOut: true\n"
needs_sdk3 = pytest.mark.skipif(
    not SDK3_PYTHON.exists(), reason="run `make .venv-sdk3/.installed-stamp` (make test does)"
)


def run_client(
    endpoint: LocalEndpoint, workdir: Path, *scenarios: str, timeout: float = 400
) -> tuple[dict[str, Any], str]:
    """Run the v3 client with the settings docs/local.md gives; (what it saw, its stdout)."""
    config = workdir / "sagemaker-config.yaml"
    config.write_text(SDK_CONFIG)
    env = {**os.environ, **endpoint.environ(), "SAGEMAKER_USER_CONFIG_OVERRIDE": str(config)}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [str(SDK3_PYTHON), str(CLIENT), str(workdir), *scenarios],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("SDK3-RESULT ")]
    assert done.returncode == 0 and lines, done.stdout[-3000:] + done.stderr[-5000:]
    seen: dict[str, Any] = json.loads(lines[-1].removeprefix("SDK3-RESULT "))
    print(f"\nSDK v3 scenario seconds: {seen['seconds']}")
    return seen, done.stdout + done.stderr


@needs_sdk3
def test_sdk_v3_trains_on_two_groups_waits_fails_and_stops(endpoint: LocalEndpoint, tmp_path: Path) -> None:
    seen, _ = run_client(endpoint, tmp_path, "train", "get-wait", "failed", "stopped")

    train = seen["train"]
    assert (train["status"], train["secondary"], train["failure"]) == ("Completed", "Completed", None)
    models = train["model"]  # every host wrote its file under its own /opt/ml/model: all were uploaded
    assert sorted(m["group"] for m in models.values()) == ["data", "data", "dnn"]
    for model in models.values():
        # the user channel only where it is assigned; the SDK's code and sm_drivers channels everywhere
        expected = ["code", "sm_drivers", "train"] if model["group"] == "data" else ["code", "sm_drivers"]
        assert model["channels"] == expected
        assert model["hp"] == "2" and model["helper"] == "helper-ran"
    hosts = endpoint.client("sagemaker").describe_training_job(TrainingJobName=train["name"])
    assert [g["InstanceGroupName"] for g in hosts["ResourceConfig"]["InstanceGroups"]] == ["data", "dnn"]

    get_wait = seen["get-wait"]
    assert get_wait["status"] == "Completed" and get_wait["model"] == ["algo-1.json", "algo-2.json"]

    failed = seen["failed"]
    assert failed["status"] == "Failed" and failed["raised"] is not None
    assert "exited with code 3" in failed["failure"] and "(instance group dnn)" in failed["failure"]
    assert "Failure Reason: AlgorithmError: host" in failed["raised"]

    stopped = seen["stopped"]  # v3 returns normally on Stopped (this package's operator fails it)
    assert (stopped["status"], stopped["secondary"]) == ("Stopped", "Stopped")
    assert stopped["model"] == ["algo-1.json", "algo-2.json"]  # written before the stop, uploaded as on SageMaker


@needs_sdk3
@pytest.mark.fixed_ports(runtime.DEFAULT_MASTER_PORT)  # torchrun's rendezvous port
def test_torchrun_runs_on_the_distribution_group_only(endpoint: LocalEndpoint, tmp_path: Path) -> None:
    seen, _ = run_client(endpoint, tmp_path, f"torchrun={Path(runtime.__file__).parent}")
    job = seen["torchrun"]
    assert job["status"] == "Completed", job
    describe = endpoint.client("sagemaker").describe_training_job(TrainingJobName=job["name"])
    assert describe["TrainingJobStatus"] == "Completed"
    hosts = {h["host"]: h for h in json.loads((endpoint.job_dir(job["name"]) / "hosts.json").read_text())}
    dnn = sorted(h for h, fact in hosts.items() if fact["group"] == "dnn")
    data = [h for h, fact in hosts.items() if fact["group"] == "data"]
    model = job["model"]
    # a world of the dnn group's 2 hosts, master on that group (never a data host), ranks 0 and 1
    assert sorted(model[f"{h}.json"]["rank"] for h in dnn) == [0, 1]
    assert {model[f"{h}.json"]["world"] for h in dnn} == {2}
    assert {model[f"{h}.json"]["sum"] for h in dnn} == {3.0}  # all_reduce of rank + 1 over the world
    rank0 = next(h for h in dnn if model[f"{h}.json"]["rank"] == 0)
    assert {model[f"{h}.json"]["master"] for h in dnn} == {hosts[rank0]["address"]}
    assert model[f"{data[0]}.json"] == {"torchrun": False}
