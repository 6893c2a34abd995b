"""The SageMaker Python SDK v2, unchanged, against the offline endpoint (in its own venv, .venv-sdk,
which ``make`` builds from tests/support/sdk-requirements.txt because its dependencies clash with
Airflow's): fit with instance groups and logs, analytics, model_data, fit(wait=False) + attach + stop."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from airflow_hetero.local import LocalEndpoint

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SDK_PYTHON = ROOT / ".venv-sdk" / "bin" / "python"
ENDPOINT_RUN = {"stop_grace": 2.0, "metrics_interval": 0.5, "log_flush_interval": 0.2}
#: The SDK's defaults file with telemetry off (the endpoint is offline; telemetry would go to AWS).
SDK_CONFIG = "SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n      TelemetryOptOut: true\n"


@pytest.mark.skipif(not SDK_PYTHON.exists(), reason="run `make .venv-sdk/.installed-stamp` (make test does)")
def test_the_sagemaker_sdk_fits_attaches_stops_and_reads_metrics(endpoint: LocalEndpoint, tmp_path: Path) -> None:
    endpoint.client("s3").create_bucket(Bucket="sdk-tests")
    config = tmp_path / "sagemaker-config.yaml"
    config.write_text(SDK_CONFIG)
    env = {
        **os.environ,
        **endpoint.environ(),  # AWS_ENDPOINT_URL, fake credentials, region: the settings docs/local.md gives
        "SAGEMAKER_USER_CONFIG_OVERRIDE": str(config),
        "SAGEMAKER_SUPPRESS_V2_WARNING": "1",
    }
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [str(SDK_PYTHON), str(Path(__file__).parents[1] / "support" / "sdk_client.py"), str(tmp_path)],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("SDK-RESULT ")]
    assert done.returncode == 0 and lines, done.stdout[-3000:] + done.stderr[-5000:]
    seen: dict[str, Any] = json.loads(lines[-1].removeprefix("SDK-RESULT "))

    fit = seen["fit"]
    assert fit["status"] == "Completed" and fit["groups"] == ["data", "dnn"]
    job = fit["model_data"].split("/")[-3]
    assert fit["model_data"] == f"s3://sdk-tests/models/{job}/output/model.tar.gz"
    assert fit["billable"] == fit["training"]  # the SDK prints "Billable seconds" from this: wall clock
    # fit(logs=...) streamed every host's log: the SDK printed the script's lines
    assert done.stdout.count("[sdk] host=algo-") == 3
    assert "Billable seconds:" in done.stdout

    analytics = seen["analytics"]
    assert analytics["metrics"] == ["train:loss"] and analytics["rows"] >= 1
    assert analytics["min"] == pytest.approx((1 + 1 / 2 + 1 / 3) / 3, abs=1e-3)  # a period's average of 3 hosts

    attach = seen["attach"]
    assert attach["status"] == "Stopped"
    assert attach["instance_count"] == 2 and attach["entry_point"] == "train.py"
    assert attach["tags"] == [{"Key": "client", "Value": "sdk"}]
    assert attach["model_data"].endswith("/output/model.tar.gz")
    model = endpoint.client("s3").head_object(
        Bucket="sdk-tests", Key=attach["model_data"].removeprefix("s3://sdk-tests/")
    )
    assert model["ContentLength"] > 0
