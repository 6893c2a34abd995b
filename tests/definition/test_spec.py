"""Definitions built from Python, files and mappings; the import-cost layering."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from airflow_hetero.definition.builder.definition_request import build_training_request
from airflow_hetero.definition.job import (
    HeteroTrainingJob,
    InstanceGroup,
    JobDefinitionError,
    TrainingInput,
    load_job,
)

BASE = yaml.safe_load((Path(__file__).parents[1] / "rule_examples.yaml").read_text())["base"]
#: How long a fresh interpreter may take to import what the test checks (Airflow, on a loaded 2-core machine).
IMPORT_TIMEOUT = 120


def test_python_objects_like_the_sdk() -> None:
    data = InstanceGroup(instance_group_name="data", instance_type="ml.c5.18xlarge", instance_count=2)
    dnn = InstanceGroup(instance_group_name="dnn", instance_type="ml.p4d.24xlarge", instance_count=1)
    job = HeteroTrainingJob(
        role=BASE["role"],
        output_path="s3://b/out",
        framework="pytorch",
        framework_version="2.0.1",
        py_version="py310",
        entry_point="train.py",
        source_dir="s3://b/src.tar.gz",
        instance_groups=[data, dnn],
        inputs={"train": TrainingInput(s3_data="s3://b/train", instance_groups=["data"]), "labels": "s3://b/labels"},
        distribution={"torch_distributed": {"enabled": True}, "instance_groups": ["dnn"]},
    )
    assert job.is_hetero and job.group_names == ["data", "dnn"] and job.distribution_group == "dnn"
    assert job.inputs["labels"].s3_data == "s3://b/labels"
    request = build_training_request(job, job_name="j1", region="us-west-2")
    labels = request["InputDataConfig"][1]["DataSource"]["S3DataSource"]
    assert labels["InstanceGroupNames"] == ["data", "dnn"], "a channel without groups goes to every group"
    assert request["HyperParameters"]["sagemaker_distribution_instance_groups"] == '["dnn"]'


def test_sdk_positional_form() -> None:
    group = InstanceGroup("data", "ml.c5.xlarge", 2)
    assert (group.instance_group_name, group.instance_type, group.instance_count) == ("data", "ml.c5.xlarge", 2)
    assert TrainingInput("s3://b/train", instance_groups=["data"]).s3_data == "s3://b/train"
    with pytest.raises(TypeError, match="at most 3 positional arguments"):
        InstanceGroup("a", "ml.c5.xlarge", 1, "extra")


def test_dag_level_imports_load_no_boto3_botocore_or_provider_operators() -> None:
    code = (
        "import sys; from airflow.providers.common.compat.sdk import DAG;"
        "before = set(sys.modules);"
        "from airflow_hetero.operators import HeteroTrainingOperator, HeteroLogSummaryOperator;"
        "from airflow_hetero.sensors import HeteroTrainingSensor;"
        "import airflow_hetero.definition.job;"
        "added = set(sys.modules) - before;"
        "heavy = ('boto3', 'botocore', 'aiobotocore', 'airflow.providers.amazon', 'moto', 'werkzeug');"
        "print(sorted(m for m in added if m.startswith(heavy)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=IMPORT_TIMEOUT
    ).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_direct_construction_raises_job_definition_error() -> None:
    with pytest.raises(JobDefinitionError) as info:
        InstanceGroup(instance_group_name="a", instance_type="ml.c5.xlarge", instance_count=-1)
    assert info.value.errors() == [{"loc": "instance_count", "msg": "must be at least 1 (got -1)"}]
    assert isinstance(info.value, ValueError)


def test_all_problems_at_once_field_and_cross_field() -> None:
    bad = dict(BASE, max_wait=5)
    bad["instance_groups"] = [dict(BASE["instance_groups"][0], instance_count=0), BASE["instance_groups"][1]]
    bad["inputs"] = dict(BASE["inputs"], extra={"s3_data": "s3://b/x", "instance_groups": ["nope"]})
    with pytest.raises(JobDefinitionError) as info:
        load_job(bad)
    assert [p.loc for p in info.value.problems] == [
        "instance_groups[0].instance_count",
        "inputs.extra.instance_groups",
        "max_wait",
    ]
    assert str(info.value).splitlines()[0] == "invalid HeteroTrainingJob definition (3 problems)"


def test_load_job_from_json_yaml_mapping_and_instance(tmp_path: Path) -> None:
    (tmp_path / "job.json").write_text(json.dumps(BASE))
    (tmp_path / "job.yml").write_text(yaml.safe_dump(BASE))
    from_json, from_yaml, from_dict = (
        load_job(tmp_path / "job.json"),
        load_job(str(tmp_path / "job.yml")),
        load_job(BASE),
    )
    assert from_json == from_yaml == from_dict
    assert load_job(from_dict) is from_dict


def test_homogeneous_job_is_valid_and_renders_instance_type() -> None:
    job = load_job(
        {k: v for k, v in BASE.items() if k not in ("instance_groups", "distribution", "inputs")}
        | {"instance_type": "ml.p3.2xlarge", "instance_count": 2, "inputs": {"train": "s3://b/t"}}
    )
    request = build_training_request(job, job_name="homog", region="us-west-2")
    assert request["ResourceConfig"] == {"VolumeSizeInGB": 30, "InstanceType": "ml.p3.2xlarge", "InstanceCount": 2}
    assert not job.is_hetero and job.distribution_group is None


def test_channels_without_groups_everywhere_stay_as_the_sdk_sends_them() -> None:
    definition = dict(BASE, inputs={"a": "s3://b/a", "b": "s3://b/b"})
    request = build_training_request(load_job(definition), job_name="x", region="us-west-2")
    assert all("InstanceGroupNames" not in c["DataSource"]["S3DataSource"] for c in request["InputDataConfig"])


def test_non_json_hyperparameter() -> None:
    with pytest.raises(JobDefinitionError) as info:
        load_job(dict(BASE, hyperparameters={"ids": {1, 2}}))
    assert info.value.errors() == [
        {
            "loc": "hyperparameters",
            "msg": "value of 'ids' is a set, which JSON cannot encode; "
            "use strings, numbers, booleans, lists or mappings",
        }
    ]


def test_templated_strings_pass_validation() -> None:
    job = load_job(dict(BASE, output_path="s3://b/models/{{ ds }}"))
    assert job.output_path == "s3://b/models/{{ ds }}"


def test_request_passes_botocore_validation() -> None:
    import botocore.session
    from botocore.validate import ParamValidator

    model = botocore.session.get_session().get_service_model("sagemaker")
    shape = model.operation_model("CreateTrainingJob").input_shape
    request = build_training_request(load_job(BASE), job_name="docs-cluster", region="us-west-2")
    report = ParamValidator().validate(request, shape)
    assert not report.has_errors(), report.generate_report()


def test_spec_import_loads_no_airflow_boto3_or_botocore() -> None:
    code = (
        "import sys, airflow_hetero, airflow_hetero.definition.job;"
        "import airflow_hetero.definition.builder.definition_request;"
        "import airflow_hetero.logs.streams, airflow_hetero.logs.per_group;"
        "import airflow_hetero.logs.size_limit, airflow_hetero.logs.table;"
        "import airflow_hetero.runtime;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('airflow', 'boto3', 'botocore', 'aiobotocore'));"
        "print(bad)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=IMPORT_TIMEOUT
    ).stdout
    assert out.strip() == "[]"


def test_building_a_definition_loads_no_botocore() -> None:
    code = (
        "import sys, yaml; from airflow_hetero.definition.job import load_job;"
        f"load_job(yaml.safe_load(open({str(Path(__file__).parents[1] / 'rule_examples.yaml')!r}))['base']);"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('botocore', 'boto3', 'airflow')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=IMPORT_TIMEOUT
    ).stdout
    assert out.strip() == "[]"


def test_build_training_request_never_sends_a_role_name_as_the_role_arn() -> None:
    """A role name is expanded through the role_arn given, or refused naming the field and how."""
    job = load_job(dict(BASE, role="SageMakerRole"))
    with pytest.raises(JobDefinitionError) as info:
        build_training_request(job, job_name="j1", region="us-west-2")
    assert [p.loc for p in info.value.problems] == ["role"]
    assert "'SageMakerRole' is a role name, not an ARN" in str(info.value)
    assert "pass role_arn=" in str(info.value) and "arn:aws:iam::<account>:role/<name>" in str(info.value)
    arn = "arn:aws:iam::123456789012:role/SageMakerRole"
    assert build_training_request(job, job_name="j1", region="us-west-2", role_arn=arn)["RoleArn"] == arn


def test_build_training_request_keeps_a_role_arn_as_given() -> None:
    job = load_job(BASE)
    assert build_training_request(job, job_name="j1", region="us-west-2")["RoleArn"] == BASE["role"]
