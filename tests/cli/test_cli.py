"""The airflow-hetero command: validate and render, offline, with readable errors."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_hetero.cli import main
from airflow_hetero.sagemaker_facts import MAX_WAIT_ONLY_WITH_SPOT

EXAMPLE = Path(__file__).resolve().parents[2] / "airflow_hetero" / "example_dags" / "hetero_retraining" / "job.yaml"
BASE = yaml.safe_load((Path(__file__).parents[1] / "rule_examples.yaml").read_text())["base"]
#: How long the console script may take to run (a fresh interpreter, on a loaded 2-core machine).
CLI_TIMEOUT = 120


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """validate and render must never open a connection."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the CLI tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_validate_valid_example(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "valid (heterogeneous cluster: data_group (2 x ml.c5.xlarge), train_group (1 x ml.g5.xlarge))" in out


def test_validate_reports_every_problem_one_line_each(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = dict(BASE, role="SageMaker Role", volume_sise=50)
    bad["instance_groups"] = [
        dict(BASE["instance_groups"][0], instance_type="ml.bogus.xlarge"),
        BASE["instance_groups"][1],
    ]
    path = write(tmp_path, "job.yaml", yaml.safe_dump(bad))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3
    assert err[0].startswith(f"{path}: role: 'SageMaker Role' is neither an IAM role ARN")
    assert err[1].startswith(f"{path}: instance_groups[0].instance_type: 'ml.bogus.xlarge' is not a SageMaker")
    assert err[2].startswith(f"{path}: volume_sise: unknown field 'volume_sise'; did you mean 'volume_size'?")


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("empty.yaml", "", "file is empty"),
        ("blank.yaml", "# only a comment\n", "file is empty"),
        (
            "syntax.yaml",
            "role: [unclosed\n",
            "syntax error: line 2, column 1: expected ',' or ']', but got '<stream end>'",
        ),
        ("syntax.json", '{"role": ', "syntax error: line 1, column 10: Expecting value"),
        ("list.yaml", "- a\n- b\n", "top level must be a mapping of fields, not a list"),
        (
            "dup.yaml",
            "role: a\ninputs:\n  a: s3://b/a\ninputs:\n  b: s3://b/b\n",
            "syntax error: line 4, column 1: duplicate key 'inputs' (the first value would be silently lost)",
        ),
        (
            "dup.json",
            '{"role": "a", "role": "b"}',
            "syntax error: duplicate key 'role' (the first value would be silently lost)",
        ),
    ],
)
def test_validate_bad_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, message: str
) -> None:
    path = write(tmp_path, name, text)
    assert main(["validate", str(path)]) == 2
    assert capsys.readouterr().err.strip() == f"{path}: {message}"


def test_validate_missing_and_unreadable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(tmp_path / "nope.yaml")]) == 2
    assert capsys.readouterr().err.strip() == f"{tmp_path / 'nope.yaml'}: file not found"
    assert main(["validate", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"{tmp_path}: is a directory, not a file"
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00bad")
    assert main(["validate", str(binary)]) == 2
    assert "cannot be read" in capsys.readouterr().err


def test_validate_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "job.json", json.dumps(dict(BASE, max_wait=10)))
    assert main(["validate", "--json", str(path)]) == 2
    report = json.loads(capsys.readouterr().out)
    assert report == {
        "valid": False,
        "problems": [
            {
                "loc": "max_wait",
                "msg": f"is only allowed with use_spot_instances: true (SageMaker: '{MAX_WAIT_ONLY_WITH_SPOT}')",
            }
        ],
    }


def test_render_prints_the_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "job.yaml", yaml.safe_dump(BASE))
    assert main(["render", str(path), "--job-name", "docs-cluster-1", "--region", "eu-west-1"]) == 0
    request = json.loads(capsys.readouterr().out)
    assert request["TrainingJobName"] == "docs-cluster-1"
    assert request["ResourceConfig"]["InstanceGroups"][1] == {
        "InstanceGroupName": "instance_group_2",
        "InstanceType": "ml.p3dn.24xlarge",
        "InstanceCount": 1,
    }
    assert request["AlgorithmSpecification"]["TrainingImage"].startswith("763104351884.dkr.ecr.eu-west-1.")
    assert request["HyperParameters"]["sagemaker_region"] == '"eu-west-1"'


def test_render_default_job_name_is_stable_and_valid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "job.yaml", yaml.safe_dump(dict(BASE, base_job_name="docs-cluster")))
    main(["render", str(path)])
    first = json.loads(capsys.readouterr().out)["TrainingJobName"]
    main(["render", str(path)])
    assert json.loads(capsys.readouterr().out)["TrainingJobName"] == first
    assert first.startswith("docs-cluster-") and len(first) == len("docs-cluster-") + 8


def test_render_bad_job_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "job.yaml", yaml.safe_dump(BASE))
    assert main(["render", str(path), "--job-name", "has_underscore"]) == 2
    assert "job_name: 'has_underscore' may contain only letters, digits and '-'" in capsys.readouterr().err


def test_render_region_without_image(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "job.yaml", yaml.safe_dump(BASE))
    assert main(["render", str(path), "--job-name", "x1", "--region", "mars-north-1"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err == f"{path}: region: no pytorch 1.12 training image is published in region 'mars-north-1'; give image_uri"
    )


def test_instance_types_lists_botocore_enum(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["instance-types"]) == 0
    names = capsys.readouterr().out.split()
    assert "ml.p4d.24xlarge" in names and names == sorted(names)


def test_console_script_exits_2_without_traceback(tmp_path: Path) -> None:
    path = write(tmp_path, "job.yaml", "role: x/y\n")
    proc = subprocess.run(
        [sys.executable, "-m", "airflow_hetero.cli", "validate", str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=CLI_TIMEOUT,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert f"{path}: role: 'x/y' is not an IAM role ARN" in proc.stderr


V3_REQUEST = Path(__file__).parents[1] / "data" / "sdk_v3" / "two_groups_torchrun.request.json"


def test_validate_takes_a_request_told_by_its_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(V3_REQUEST)]) == 0
    assert capsys.readouterr().out.strip() == (
        f"{V3_REQUEST}: valid (CreateTrainingJob request, heterogeneous cluster: "
        "data_group (2 x ml.c5.xlarge), dnn_group (1 x ml.p3.2xlarge))"
    )
    request = json.loads(V3_REQUEST.read_text())
    request["ResourceConfig"] = {"InstanceType": "ml.c5.xlarge", "InstanceCount": "2", "VolumeSizeInGB": 30}
    for channel in request["InputDataConfig"]:
        del channel["DataSource"]["S3DataSource"]["InstanceGroupNames"]
    path = write(tmp_path, "request.yaml", yaml.safe_dump(request))
    assert main(["validate", "--json", str(path)]) == 0
    assert json.loads(capsys.readouterr().out) == {"valid": True, "kind": "request", "problems": []}


def test_validate_reports_every_request_problem_by_its_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    request = json.loads(V3_REQUEST.read_text())
    request["InputDataConfig"][0]["DataSource"]["S3DataSource"]["InstanceGroupNames"] = ["gpu_group"]
    request["ResourceConfig"]["InstanceGroups"][0]["InstanceType"] = "ml.bogus"
    path = write(tmp_path, "request.json", json.dumps(request))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2
    assert err[0].startswith(f"{path}: ResourceConfig.InstanceGroups[0].InstanceType: 'ml.bogus' is not one of the ")
    assert err[1] == (
        f"{path}: InputDataConfig[0].DataSource.S3DataSource.InstanceGroupNames[0]: Instance groups [gpu_group] "
        "assigned to channel train are not defined in ResourceConfig.InstanceGroups [data_group, dnn_group]"
    )


def test_the_request_flag_checks_a_file_as_a_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "job.yaml", yaml.safe_dump(BASE))  # a definition, read as a request
    assert main(["validate", "--request", str(path)]) == 2
    assert "role: unknown field 'role'" in capsys.readouterr().err


def test_render_names_a_request_as_the_task_would(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sent = json.loads(V3_REQUEST.read_text())
    assert main(["render", str(V3_REQUEST), "--job-name", "v3-job-1"]) == 0
    assert json.loads(capsys.readouterr().out) == {**sent, "TrainingJobName": "v3-job-1"}
    assert main(["render", str(V3_REQUEST)]) == 0
    name = json.loads(capsys.readouterr().out)["TrainingJobName"]
    assert name.startswith("v3-hetero-20261202040019-") and name != sent["TrainingJobName"]


def test_validate_and_render_say_what_the_providers_steps_will_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = json.loads(V3_REQUEST.read_text())
    config["RoleArn"] = "SageMakerRole"
    config["S3Operations"] = {
        "S3CreateBucket": [{"Bucket": "staging-bucket"}],
        "S3Upload": [{"Path": "model", "Bucket": "staging-bucket", "Key": "m.tar.gz", "Tar": True}],
    }
    path = write(tmp_path, "config.json", json.dumps(config))
    assert main(["validate", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == [
        "  before the create: RoleArn: role name SageMakerRole is expanded to its ARN (IAM GetRole)",
        "  before the create: S3Operations: bucket staging-bucket is created (unless this account has it)",
        "  before the create: S3Operations: model is uploaded as .tar.gz to s3://staging-bucket/m.tar.gz",
    ]
    assert main(["render", str(path), "--job-name", "job-1"]) == 0
    out, err = capsys.readouterr()
    rendered = json.loads(out)
    assert rendered["RoleArn"] == "SageMakerRole" and "S3Operations" not in rendered
    assert err.splitlines()[0] == (
        "before the create: RoleArn: role name SageMakerRole is expanded to its ARN (IAM GetRole)"
    )


def test_validate_lists_a_definitions_role_name_to_expand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "job.yaml", yaml.safe_dump(dict(BASE, role="SageMakerRole")))
    assert main(["validate", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == [
        "  before the create: role: role name SageMakerRole is expanded to its ARN (IAM GetRole)"
    ]
    assert main(["validate", str(write(tmp_path, "arn.yaml", yaml.safe_dump(BASE)))]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1  # an ARN: nothing to do first


def fallback_job(tmp_path: Path) -> Path:
    job = yaml.safe_load(yaml.safe_dump(BASE))
    job["instance_groups"][1]["fallback_instance_types"] = [
        "ml.p4d.24xlarge",
        {"instance_type": "ml.g5.48xlarge", "instance_count": 2},
    ]
    return write(tmp_path, "job.yaml", yaml.safe_dump(job))


def test_validate_lists_the_clusters_tried_in_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(fallback_job(tmp_path)), "--fallback", "instance_group_1=ml.c6i.32xlarge"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:] == [
        "  clusters tried when capacity is short, in order (docs/capacity.md):",
        "    1. instance_group_1=2 x ml.c5.18xlarge, instance_group_2=1 x ml.p3dn.24xlarge",
        "    2. instance_group_1=2 x ml.c6i.32xlarge, instance_group_2=1 x ml.p3dn.24xlarge",
        "    3. instance_group_1=2 x ml.c5.18xlarge, instance_group_2=1 x ml.p4d.24xlarge",
        "    4. instance_group_1=2 x ml.c6i.32xlarge, instance_group_2=1 x ml.p4d.24xlarge",
        "    5. instance_group_1=2 x ml.c5.18xlarge, instance_group_2=2 x ml.g5.48xlarge",
        "    6. instance_group_1=2 x ml.c6i.32xlarge, instance_group_2=2 x ml.g5.48xlarge",
    ]


def test_render_says_the_clusters_on_stderr_for_a_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", str(fallback_job(tmp_path)), "--job-name", "j"]) == 0
    request = json.loads(capsys.readouterr().out)
    path = write(tmp_path, "request.json", json.dumps(request))
    assert main(["render", str(path), "--fallback", "instance_group_2=ml.p5.48xlarge:2,ml.p4d.24xlarge"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["ResourceConfig"] == request["ResourceConfig"]  # the first choice is sent
    assert captured.err.splitlines()[-3:] == [
        "  1. instance_group_1=2 x ml.c5.18xlarge, instance_group_2=1 x ml.p3dn.24xlarge",
        "  2. instance_group_1=2 x ml.c5.18xlarge, instance_group_2=2 x ml.p5.48xlarge",
        "  3. instance_group_1=2 x ml.c5.18xlarge, instance_group_2=1 x ml.p4d.24xlarge",
    ]


def test_a_bad_fallback_option_is_reported_by_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = fallback_job(tmp_path)
    assert main(["validate", str(path), "--fallback", "instance_group_1=ml.g5.xlarge"]) == 2
    assert "fallback_instance_types.instance_group_1[0]: 'ml.g5.xlarge' is a GPU type" in capsys.readouterr().err
    assert main(["validate", str(path), "--fallback", "ml.g5.xlarge"]) == 2
    assert "--fallback: 'ml.g5.xlarge': expected GROUP=TYPE[:COUNT],..." in capsys.readouterr().err
