"""The one interface the operator submits through: a definition (DefinitionJob) and a request alike."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from support.moto_jobs import hetero_request
from support.tarballs import members

from airflow_hetero.definition.builder.definition_request import base_job_name, build_training_request
from airflow_hetero.definition.builder.source import SourceDirError, package_source_dir
from airflow_hetero.definition.errors import JobDefinitionError
from airflow_hetero.definition.job import load_job
from airflow_hetero.definition.raw_request.training_request import TrainingRequest
from airflow_hetero.definition.submittable import DefinitionJob, Submittable, load_submittable

BASE = yaml.safe_load((Path(__file__).parents[1] / "rule_examples.yaml").read_text())["base"]
REGION = "us-west-2"
KEY = "arn:aws:kms:us-west-2:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def test_a_definition_builds_what_build_training_request_builds() -> None:
    job = load_job(BASE)
    loaded = load_submittable(BASE, request=False)
    assert isinstance(loaded, DefinitionJob) and loaded.job == job
    assert loaded.build(job_name="nightly-1", region=REGION) == build_training_request(
        job, job_name="nightly-1", region=REGION
    )
    image = loaded.build(job_name="nightly-1", region="eu-west-1")["AlgorithmSpecification"]["TrainingImage"]
    assert ".dkr.ecr.eu-west-1.amazonaws.com/pytorch-training:" in image  # the region picks the image
    assert loaded.name_note is None
    assert not loaded.steps and loaded.steps.describe() == []  # nothing of the provider's to run first


@pytest.mark.parametrize(
    ("changes", "base"),
    [
        ({}, "pytorch-training"),
        ({"base_job_name": "nightly"}, "nightly"),
        ({"image_uri": "123456789012.dkr.ecr.us-west-2.amazonaws.com/my_trainer:1"}, "my-trainer"),
    ],
)
def test_a_definitions_base_job_name_is_the_sdks(changes: dict[str, str], base: str) -> None:
    job = load_job({**BASE, **changes})
    assert DefinitionJob(job).base_job_name == base_job_name(job) == base


def test_a_request_is_sent_as_given_under_the_tasks_name_in_any_region(tmp_path: Path) -> None:
    config = hetero_request("provider-job")
    loaded = load_submittable(copy.deepcopy(config), request=True)
    assert isinstance(loaded, TrainingRequest)
    expected = {**config, "TrainingJobName": "task-job-1"}
    assert loaded.build(job_name="task-job-1", region="us-east-1") == expected
    assert loaded.build(job_name="task-job-1", region="eu-west-1") == expected
    assert loaded.build(job_name="task-job-1") == expected  # as the CLI called it before
    assert loaded.base_job_name == "provider-job"
    assert loaded.name_note is not None and "'provider-job' is replaced" in loaded.name_note
    assert loaded.source_upload("task-job-1", tmp_path) is None  # its code's S3 location is its own


def test_a_provider_configs_steps_come_with_the_request_and_its_role_name_needs_its_arn(tmp_path: Path) -> None:
    operations = {
        "S3CreateBucket": [{"Bucket": "code-bucket"}],
        "S3Upload": [{"Path": "model", "Bucket": "code-bucket", "Key": "m/model.tar.gz", "Tar": True}],
    }
    config = hetero_request("provider-job", RoleArn="SageMakerRole", S3Operations=operations)
    job: Submittable = load_submittable(copy.deepcopy(config), request=True)
    assert job.steps.role_name == "SageMakerRole"
    assert job.steps.buckets == ("code-bucket",)
    assert [u.uri for u in job.steps.uploads] == ["s3://code-bucket/m/model.tar.gz"]
    with pytest.raises(ValueError, match=r"^RoleArn: the role name 'SageMakerRole' has not been expanded"):
        job.build(job_name="task-job-1", region=REGION)
    arn = "arn:aws:iam::123456789012:role/SageMakerRole"
    built = job.build(job_name="task-job-1", region=REGION, role_arn=arn)
    del config["S3Operations"]
    assert built == {**config, "TrainingJobName": "task-job-1", "RoleArn": arn}
    assert job.source_upload("task-job-1", tmp_path) is None  # the provider's uploads are steps, not code


def test_a_definition_and_the_request_it_builds_send_the_same_request() -> None:
    sent = DefinitionJob(load_job(BASE)).build(job_name="same-job-1", region=REGION)
    as_request = load_submittable(copy.deepcopy(sent), request=True)
    assert as_request.build(job_name="same-job-1", region=REGION) == sent
    assert as_request.build(job_name="other-job-2", region=REGION) == {**sent, "TrainingJobName": "other-job-2"}


def test_local_code_is_packaged_and_uploaded_where_the_request_points(tmp_path: Path) -> None:
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text("print('hi')\n")
    job = load_job(dict(BASE, source_dir="code", output_path="s3://out-bucket/prefix", output_kms_key=KEY))
    upload = DefinitionJob(job).source_upload("job-1", tmp_path)
    assert upload is not None
    assert upload.uri == "s3://out-bucket/job-1/source/sourcedir.tar.gz"
    assert members(upload.code) == members(package_source_dir(job, base=tmp_path))
    assert "train.py" in members(upload.code)
    assert upload.extra_args == {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": KEY}
    hyperparameters = DefinitionJob(job).build(job_name="job-1", region=REGION)["HyperParameters"]
    assert hyperparameters["sagemaker_submit_directory"] == json.dumps(upload.uri)


def test_code_already_in_s3_needs_no_upload(tmp_path: Path) -> None:
    assert BASE["source_dir"].startswith("s3://")
    assert DefinitionJob(load_job(BASE)).source_upload("job-1", tmp_path) is None


def test_missing_local_code_fails_naming_its_field(tmp_path: Path) -> None:
    job = DefinitionJob(load_job(dict(BASE, source_dir="missing")))
    with pytest.raises(SourceDirError, match=r"^source_dir: '.*missing' does not exist or is not a directory$"):
        job.source_upload("job-1", tmp_path)
    script_only = DefinitionJob(load_job({k: v for k, v in BASE.items() if k != "source_dir"}))
    with pytest.raises(SourceDirError, match=r"^entry_point: '.*train\.py' does not exist or is not a file$"):
        script_only.source_upload("job-1", tmp_path)


@pytest.mark.parametrize("request_mode", [False, True])
def test_either_kind_names_the_field_of_a_problem(request_mode: bool) -> None:
    bad_role = "arn:aws:iam::12:role/R"  # an ARN (a name has no '/'), of an account with too few digits
    source = hetero_request("x", RoleArn=bad_role) if request_mode else dict(BASE, role=bad_role)
    with pytest.raises(JobDefinitionError) as info:
        load_submittable(source, request=request_mode)
    assert {p.loc for p in info.value.problems} == {"RoleArn" if request_mode else "role"}
    good = hetero_request("x") if request_mode else BASE
    job: Submittable = load_submittable(good, request=request_mode)
    with pytest.raises(JobDefinitionError) as bad_name:
        job.build(job_name="no_underscores", region=REGION)
    assert [(p.loc, p.msg) for p in bad_name.value.problems] == [
        (
            "job_name",
            "'no_underscores' may contain only letters, digits and '-', and must start and end with a letter or digit",
        )
    ]
