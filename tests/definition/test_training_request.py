"""Request mode's checks: botocore's shape rules and the service's heterogeneous rules, by request path."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.moto_jobs import ROLE, hetero_request

from airflow_hetero.definition.builder.definition_request import build_training_request
from airflow_hetero.definition.errors import JobDefinitionError
from airflow_hetero.definition.job import load_job
from airflow_hetero.definition.raw_request import service_shapes
from airflow_hetero.definition.raw_request.training_request import TrainingRequest, is_request_document, load_request
from airflow_hetero.local.api.errors import ServiceError
from airflow_hetero.local.api.validators import validate_create

TESTS = Path(__file__).parents[1]
V3_REQUEST = TESTS / "data" / "sdk_v3" / "two_groups_torchrun.request.json"


def provider_config(**changes: Any) -> dict[str, Any]:
    """An Amazon provider SageMakerTrainingOperator ``config``: a CreateTrainingJob request with its name."""
    config = hetero_request("provider-job-2026-01-01")
    config["AlgorithmSpecification"]["TrainingImage"] = (
        "123456789012.dkr.ecr.us-east-1.amazonaws.com/hetero-train:latest"
    )
    test = copy.deepcopy(config["InputDataConfig"][0])
    test["ChannelName"] = "test"
    test["DataSource"]["S3DataSource"].update(S3Uri="s3://bucket/test", InstanceGroupNames=["dnn_group"])
    config["InputDataConfig"].append(test)
    config.update(changes)
    return config


def problems(data: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(JobDefinitionError) as info:
        load_request(data)
    assert str(info.value).startswith("invalid CreateTrainingJob request (")
    return [(p.loc, p.msg) for p in info.value.problems]


def locs(data: dict[str, Any]) -> list[str]:
    return [loc for loc, _ in problems(data)]


def test_the_request_sdk_v3_sends_is_taken_unchanged() -> None:
    sent = json.loads(V3_REQUEST.read_text())
    loaded = load_request(copy.deepcopy(sent))
    assert loaded.given_name == sent["TrainingJobName"]
    built = loaded.build(job_name="v3-task-job")
    assert built == {**sent, "TrainingJobName": "v3-task-job"}
    assert built["AlgorithmSpecification"]["ContainerEntrypoint"] == ["/bin/bash"]
    assert not any(k.startswith("sagemaker_") for k in built["HyperParameters"])
    assert loaded.base_job_name == "v3-hetero-20261202040019"  # the SDK's name, the base of the task's


def test_the_provider_config_is_taken_and_its_name_is_replaced() -> None:
    loaded = load_request(provider_config())
    assert loaded.given_name == "provider-job-2026-01-01"
    assert "TrainingJobName" not in loaded.request
    assert loaded.name_note is not None and "provider-job-2026-01-01" in loaded.name_note
    without_name = provider_config()
    del without_name["TrainingJobName"]
    assert load_request(without_name).base_job_name == "hetero-train"  # the image's repository, as the SDK


def test_rendered_strings_become_the_numbers_and_booleans_the_shapes_want() -> None:
    config = provider_config(EnableNetworkIsolation="True")
    config["ResourceConfig"]["VolumeSizeInGB"] = "30"  # what Jinja renders
    config["ResourceConfig"]["InstanceGroups"][0]["InstanceCount"] = " 2 "
    config["StoppingCondition"]["MaxRuntimeInSeconds"] = "3600"
    request = load_request(config).request
    assert request["ResourceConfig"]["VolumeSizeInGB"] == 30
    assert request["ResourceConfig"]["InstanceGroups"][0]["InstanceCount"] == 2
    assert request["StoppingCondition"]["MaxRuntimeInSeconds"] == 3600
    assert request["EnableNetworkIsolation"] is True


def test_a_string_that_is_no_number_is_refused_with_its_path() -> None:
    config = provider_config()
    config["ResourceConfig"]["InstanceGroups"][1]["InstanceCount"] = "two"
    config["StoppingCondition"]["MaxRuntimeInSeconds"] = True
    assert problems(config) == [
        ("ResourceConfig.InstanceGroups[1].InstanceCount", "expected an integer, got the string 'two'"),
        ("StoppingCondition.MaxRuntimeInSeconds", "expected an integer, got true"),
    ]


def test_unknown_members_are_refused_with_a_suggestion_as_the_cli_refuses_them() -> None:
    config = provider_config(HyperParameter={"a": "b"})
    config["OutputDataConfig"]["S3OutputPat"] = "s3://x"
    found = dict(problems(config))
    assert found["HyperParameter"].startswith("unknown field 'HyperParameter'; did you mean 'HyperParameters'?")
    assert found["OutputDataConfig.S3OutputPat"].startswith("unknown field 'S3OutputPat'; did you mean 'S3OutputPath'?")


def test_the_providers_s3_operations_and_role_name_are_taken_out_of_the_request() -> None:
    operations = {
        "S3CreateBucket": [{"Bucket": "staging-bucket"}],
        "S3Upload": [{"Path": "data/train.csv", "Bucket": "staging-bucket", "Key": "train/train.csv", "Tar": False}],
    }
    loaded = load_request(provider_config(S3Operations=operations, RoleArn="SageMakerRole"))
    assert loaded.steps.buckets == ("staging-bucket",)
    (upload,) = loaded.steps.uploads
    assert (upload.path, upload.uri, upload.tar, upload.loc) == (
        "data/train.csv",
        "s3://staging-bucket/train/train.csv",
        False,
        "S3Operations.S3Upload[0]",
    )
    assert loaded.steps.role_name == "SageMakerRole"
    assert "S3Operations" not in loaded.request  # never sent: SageMaker has no such member
    built = loaded.build(job_name="task-job", role_arn="arn:aws:iam::123456789012:role/SageMakerRole")
    assert built["RoleArn"] == "arn:aws:iam::123456789012:role/SageMakerRole" and "S3Operations" not in built
    with pytest.raises(ValueError, match="RoleArn: the role name 'SageMakerRole' has not been expanded"):
        loaded.build(job_name="task-job")
    assert not load_request(provider_config()).steps  # a plain request has nothing to do first


def test_botocore_shape_rules_required_enum_pattern_length_and_bounds() -> None:
    config = provider_config(RoleArn="arn:aws:iam::12:role/SageMakerRole")
    del config["OutputDataConfig"]
    config["AlgorithmSpecification"]["TrainingInputMode"] = "Files"
    config["ResourceConfig"]["InstanceGroups"][0]["InstanceType"] = "ml.c5.xlarg"
    config["StoppingCondition"]["MaxRuntimeInSeconds"] = 0
    config["InputDataConfig"][0]["ChannelName"] = "train data"
    found = dict(problems(config))
    assert found["OutputDataConfig"] == "field required"
    assert found["RoleArn"].startswith(
        "'arn:aws:iam::12:role/SageMakerRole' does not match botocore's RoleArn pattern arn:aws"
    )
    assert found["AlgorithmSpecification.TrainingInputMode"] == (
        "'Files' is not allowed; did you mean 'File'? (allowed: Pipe, File, FastFile)"
    )
    assert found["ResourceConfig.InstanceGroups[0].InstanceType"].startswith("'ml.c5.xlarg' is not one of the ")
    assert "did you mean 'ml.c5.xlarge'?" in found["ResourceConfig.InstanceGroups[0].InstanceType"]
    assert found["StoppingCondition.MaxRuntimeInSeconds"] == "must be at least 1 (got 0)"
    assert found["InputDataConfig[0].ChannelName"] == (
        "'train data' does not match botocore's ChannelName pattern [A-Za-z0-9\\.\\-_]+"
    )


def test_at_most_five_groups_and_group_name_lengths() -> None:
    config = provider_config()
    groups = [{"InstanceGroupName": f"g{i}", "InstanceType": "ml.c5.xlarge", "InstanceCount": 1} for i in range(6)]
    groups[0]["InstanceGroupName"] = "g" * 65
    config["ResourceConfig"]["InstanceGroups"] = groups
    del config["InputDataConfig"]
    assert problems(config) == [
        ("ResourceConfig.InstanceGroups", "must have at most 5 items (got 6)"),
        ("ResourceConfig.InstanceGroups[0].InstanceGroupName", "must have at most 64 characters (got 65)"),
    ]


def test_hyperparameter_limits() -> None:
    many = {f"k{i}": "v" for i in range(101)}
    assert problems(provider_config(HyperParameters=many)) == [
        ("HyperParameters", "must have at most 100 entries (got 101)")
    ]
    long_key = "k" * 257
    found = problems(provider_config(HyperParameters={long_key: "v", "value": "v" * 2501}))
    assert found == [
        (f"HyperParameters.{long_key}", "key: must have at most 256 characters (got 257)"),
        ("HyperParameters.value", "must have at most 2500 characters (got 2501)"),
    ]


def test_instance_type_and_count_are_exclusive_with_groups() -> None:
    config = provider_config()
    config["ResourceConfig"].update(InstanceType="ml.c5.xlarge", InstanceCount=1)
    msg = "InstanceType or InstanceCount cannot be specified with InstanceGroups"
    assert problems(config) == [("ResourceConfig.InstanceType", msg), ("ResourceConfig.InstanceCount", msg)]
    neither = provider_config()
    del neither["ResourceConfig"]["InstanceGroups"], neither["InputDataConfig"]
    assert problems(neither) == [
        ("ResourceConfig", "Either InstanceType and InstanceCount or InstanceGroups must be specified"),
    ]


def test_channel_groups_must_exist_and_be_named_by_path() -> None:
    config = provider_config()
    config["InputDataConfig"][1]["DataSource"]["S3DataSource"]["InstanceGroupNames"] = ["gpu_group"]
    assert problems(config) == [
        (
            "InputDataConfig[1].DataSource.S3DataSource.InstanceGroupNames[0]",
            "Instance groups [gpu_group] assigned to channel test are not defined in "
            "ResourceConfig.InstanceGroups [data_group, dnn_group]",
        )
    ]


def test_channel_assignment_is_all_or_nothing_and_names_are_unique() -> None:
    config = provider_config()
    del config["InputDataConfig"][1]["DataSource"]["S3DataSource"]["InstanceGroupNames"]
    config["InputDataConfig"].append(copy.deepcopy(config["InputDataConfig"][0]))
    assert problems(config) == [
        ("InputDataConfig[2].ChannelName", "Channel names must be unique within a training job: [train]"),
        (
            "InputDataConfig",
            "Some channels have assigned instance groups: [train, train] while others not: [test]",
        ),
    ]


def test_groups_only_with_instance_groups_and_duplicate_groups() -> None:
    homogeneous = provider_config()
    homogeneous["ResourceConfig"] = {"InstanceType": "ml.c5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30}
    found = problems(homogeneous)
    assert found[0] == (
        "InputDataConfig[0].DataSource.S3DataSource.InstanceGroupNames",
        "InstanceGroupNames in channel train can only be specified when ResourceConfig uses InstanceGroups",
    )
    twice = provider_config()
    twice["ResourceConfig"]["InstanceGroups"][1]["InstanceGroupName"] = "data_group"
    twice["InputDataConfig"][1]["DataSource"]["S3DataSource"]["InstanceGroupNames"] = ["data_group"]
    assert problems(twice) == [
        (
            "ResourceConfig.InstanceGroups[1].InstanceGroupName",
            "Instance group names must be unique within a training job: [data_group]",
        )
    ]


@pytest.mark.parametrize(
    ("value", "msg"),
    [
        ('["dnn_group", "data_group"]', "the distribution may name only one instance group (got 2"),
        ('["gpu"]', "'gpu' is not one of the job's instance groups [data_group, dnn_group]"),
        ("dnn_group", "must be a JSON list of instance group names"),
    ],
)
def test_the_sdk_distribution_group_names_one_existing_group(value: str, msg: str) -> None:
    config = provider_config()
    config["HyperParameters"]["sagemaker_distribution_instance_groups"] = value
    [(loc, found)] = problems(config)
    assert loc == "HyperParameters.sagemaker_distribution_instance_groups"
    assert found.startswith(msg)


def test_metric_regular_expressions_compile() -> None:
    config = provider_config()
    config["AlgorithmSpecification"]["MetricDefinitions"] = [{"Name": "loss", "Regex": "loss=(["}]
    [(loc, msg)] = problems(config)
    assert loc == "AlgorithmSpecification.MetricDefinitions[0].Regex"
    assert msg.startswith("MetricDefinitions: the regular expression of metric loss is not valid")


def _bad(name: str) -> dict[str, Any]:
    config = provider_config(TrainingJobName="rules-job")
    if name == "type-and-groups":
        config["ResourceConfig"]["InstanceType"] = "ml.c5.xlarge"
    elif name == "unknown-group":
        config["InputDataConfig"][0]["DataSource"]["S3DataSource"]["InstanceGroupNames"] = ["nope"]
    elif name == "mixed":
        del config["InputDataConfig"][0]["DataSource"]["S3DataSource"]["InstanceGroupNames"]
    elif name == "duplicate-channel":
        config["InputDataConfig"][1]["ChannelName"] = "train"
    elif name == "no-resources":
        del config["ResourceConfig"]
    return config


@pytest.mark.parametrize("name", ["type-and-groups", "unknown-group", "mixed", "duplicate-channel", "no-resources"])
def test_the_endpoint_refuses_each_rule_with_the_same_message(name: str) -> None:
    """One place for each rule: request mode and the offline endpoint word it alike."""
    bad = _bad(name)
    first = problems(bad)[0][1]
    with pytest.raises(ServiceError) as info:
        validate_create(bad)
    assert info.value.code == "ValidationException"
    assert info.value.message == first


def test_every_sdk_v2_golden_request_round_trips_through_request_mode() -> None:
    """A definition's rendered request validates in request mode and is sent unchanged."""
    cases = sorted((TESTS / "sdk_cases").glob("*.yaml"))
    checked = 0
    for case in cases:
        meta = yaml.safe_load(case.read_text())
        try:
            job = load_job(meta["job"])
        except JobDefinitionError:
            continue  # the definition refuses it (the SDK's errors, the cases refused on purpose)
        request = build_training_request(job, job_name=meta["job_name"], region=meta.get("region", "us-west-2"))
        loaded = load_request(copy.deepcopy(request))
        assert loaded.build(job_name=meta["job_name"]) == request, case.name
        checked += 1
    assert checked >= 40


def test_requests_and_definitions_are_told_apart_by_their_keys() -> None:
    assert is_request_document(provider_config())
    assert not is_request_document({"role": ROLE, "instance_type": "ml.c5.xlarge"})


def test_a_request_file_is_read_like_a_definition_file(tmp_path: Path) -> None:
    path = tmp_path / "request.yaml"
    path.write_text(yaml.safe_dump(provider_config()))
    assert isinstance(load_request(path), TrainingRequest)
    (tmp_path / "bad.json").write_text('{"RoleArn": 1, "RoleArn": 2}')
    with pytest.raises(JobDefinitionError, match="syntax error"):
        load_request(tmp_path / "bad.json")


def test_compiled_shapes_are_cached_on_disk_and_a_broken_cache_is_only_a_miss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_HETERO_CACHE_DIR", str(tmp_path))
    service_shapes.operation_shapes.cache_clear()
    try:
        first = service_shapes.operation_shapes("CreateTrainingJob")
        [cached] = (tmp_path / "shapes").glob("sagemaker-CreateTrainingJob-*.json")
        assert json.loads(cached.read_text())["shapes"] == first.shapes
        assert "documentation" not in cached.read_text()
        cached.write_text("{not json")
        service_shapes.operation_shapes.cache_clear()
        again = service_shapes.operation_shapes("CreateTrainingJob")
        assert again.shapes == first.shapes
        assert first.shapes["TrainingJobName"]["max"] == 63  # from the model, not a copy
    finally:
        service_shapes.operation_shapes.cache_clear()
