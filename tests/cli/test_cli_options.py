"""``airflow-hetero validate`` and ``render`` refuse what SageMaker refuses for instance groups (warm pools, training
plans, instance preferences) and check managed spot as the service does, offline, naming the path."""

from __future__ import annotations

import copy
import json
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_hetero import sagemaker_facts as facts
from airflow_hetero.cli import main

DATA = Path(__file__).parents[1]
V3_REQUEST = json.loads((DATA / "data" / "sdk_v3" / "two_groups_torchrun.request.json").read_text())
BASE = yaml.safe_load((DATA / "rule_examples.yaml").read_text())["base"]
PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/weekly-p4d"


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the CLI tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def _file(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "job.json"
    path.write_text(json.dumps(data))
    return path


def _with_resource(**members: Any) -> dict[str, Any]:
    request = copy.deepcopy(V3_REQUEST)
    request["ResourceConfig"].update(members)
    return request


REFUSED = [
    (
        {"KeepAlivePeriodInSeconds": 600},
        "ResourceConfig.KeepAlivePeriodInSeconds: KeepAlivePeriodInSeconds cannot be used with "
        f"InstanceGroups (SageMaker guide, warm pools: '{facts.WARM_POOL_NOT_HETERO}')",
    ),
    (
        {"TrainingPlanArn": PLAN},
        "ResourceConfig.TrainingPlanArn: TrainingPlanArn cannot be used with "
        f"InstanceGroups: {facts.TRAINING_PLAN_NOT_HETERO} (botocore: '{facts.TRAINING_PLAN_DOC}')",
    ),
    (
        {"InstancePreferences": [{"InstanceType": "ml.p4d.24xlarge"}]},
        "ResourceConfig.InstancePreferences: InstancePreferences cannot be used with "
        f"InstanceGroups (SageMaker: '{facts.INSTANCE_PREFERENCES_EXCLUSIVE}')",
    ),
]


@pytest.mark.parametrize(("members", "line"), REFUSED, ids=["warm-pool", "plan", "preferences"])
def test_validate_and_render_refuse_a_request_the_service_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], members: dict[str, Any], line: str
) -> None:
    path = _file(tmp_path, _with_resource(**members))
    assert main(["validate", str(path)]) == 2
    out, err = capsys.readouterr()
    assert "valid" not in out and err.strip().splitlines() == [f"{path}: {line}"]
    assert main(["render", str(path), "--job-name", "refused-1"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.strip().splitlines() == [f"{path}: {line}"]


def test_the_same_request_without_the_option_is_valid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(_file(tmp_path, _with_resource()))]) == 0
    assert ": valid (CreateTrainingJob request" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("keep_alive_period_in_seconds", 600),
        ("training_plan", PLAN),
        ("instance_preferences", [{"InstanceType": "ml.p4d.24xlarge"}]),
    ],
)
def test_validate_refuses_the_sdk_names_in_a_definition(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: Any
) -> None:
    path = _file(tmp_path, {**BASE, field: value})
    assert main(["validate", "--json", str(path)]) == 2
    report = json.loads(capsys.readouterr().out)
    assert [p["loc"] for p in report["problems"]] == [field]
    assert report["problems"][0]["msg"].startswith("cannot be used with instance_groups")


def test_render_a_spot_definition(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spot = {"use_spot_instances": True, "max_run": 3600, "max_wait": 7200, "checkpoint_s3_uri": "s3://my-bucket/ckpt"}
    path = _file(tmp_path, {**BASE, **spot})
    assert main(["render", str(path), "--job-name", "spot-1", "--region", "us-east-1"]) == 0
    request = json.loads(capsys.readouterr().out)
    assert request["EnableManagedSpotTraining"] is True
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200}
    assert request["CheckpointConfig"] == {"S3Uri": "s3://my-bucket/ckpt"}
    path = _file(tmp_path, {**BASE, **spot, "max_wait": 1800})
    assert main(["render", str(path), "--job-name", "spot-1"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and f"{path}: max_wait: must be at least max_run (3600)" in err
