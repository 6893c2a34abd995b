"""What SDKs read from the endpoint: Describe valid against botocore's shape in every ending, tags,
unsupported actions (4xx naming the action, never a retried 5xx), metric definitions to CloudWatch."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError
from botocore.validate import ParamValidator
from support.local_jobkit import put_source, request, unique, wait

from airflow_hetero.local import LocalEndpoint
from airflow_hetero.local.api.constraints import service_model

pytestmark = pytest.mark.slow

SLEEP = "import time\ntime.sleep(60)\n"


def _shape_problems(described: dict[str, Any]) -> str:
    """botocore's verdict on a parsed DescribeTrainingJob answer ('' when valid against its output shape)."""
    shape = service_model().operation_model("DescribeTrainingJob").output_shape
    answer = {k: v for k, v in described.items() if k != "ResponseMetadata"}
    report = ParamValidator().validate(answer, shape)
    return str(report.generate_report()) if report.has_errors() else ""


def _checked(described: dict[str, Any]) -> dict[str, Any]:
    assert _shape_problems(described) == ""
    assert described["ModelArtifacts"]["S3ModelArtifacts"].endswith(
        f"/{described['TrainingJobName']}/output/model.tar.gz"
    )
    assert described["OutputDataConfig"]["KmsKeyId"] == ""
    assert described["ProfilingStatus"] == "Disabled"
    assert described["BillableTimeInSeconds"] == described["TrainingTimeInSeconds"]
    return described


def test_the_shape_check_itself_catches_a_missing_required_member() -> None:
    answer = {"TrainingJobName": "x"}
    assert "ModelArtifacts" in _shape_problems(answer)


def test_describe_is_valid_in_every_ending(sm: Any, s3: Any) -> None:
    ok, failed, stopped, timed_out = (unique(p) for p in ("shape-ok", "shape-fail", "shape-stop", "shape-max"))
    sm.create_training_job(**request(ok, put_source(s3, ok, "print('ok')\n")))
    sm.create_training_job(**request(failed, put_source(s3, failed, "raise SystemExit(4)\n")))
    sm.create_training_job(**request(stopped, put_source(s3, stopped, SLEEP)))
    sm.create_training_job(**request(timed_out, put_source(s3, timed_out, SLEEP), max_runtime=1))
    wait(sm, stopped, secondary="Training")
    sm.stop_training_job(TrainingJobName=stopped)

    assert _checked(wait(sm, ok))["TrainingJobStatus"] == "Completed"
    done = _checked(wait(sm, failed))
    assert (done["TrainingJobStatus"], done["SecondaryStatus"]) == ("Failed", "Failed")
    done = _checked(wait(sm, stopped))
    assert (done["TrainingJobStatus"], done["SecondaryStatus"]) == ("Stopped", "Stopped")
    done = _checked(wait(sm, timed_out))
    assert (done["TrainingJobStatus"], done["SecondaryStatus"]) == ("Stopped", "MaxRuntimeExceeded")
    # a stopped job's model is uploaded (empty here), so SDK model_data points at an object; a job
    # its 1-s MaxRuntime ends while still Downloading (a busy machine) has no host laid out, no model
    reached_training = {
        name
        for name in (ok, stopped, timed_out)
        if "Training"
        in [t["Status"] for t in sm.describe_training_job(TrainingJobName=name)["SecondaryStatusTransitions"]]
    }
    assert {ok, stopped} <= reached_training
    for name in reached_training:
        uri = sm.describe_training_job(TrainingJobName=name)["ModelArtifacts"]["S3ModelArtifacts"]
        bucket, key = uri.removeprefix("s3://").split("/", 1)
        assert s3.head_object(Bucket=bucket, Key=key)["ContentLength"] > 0


def test_profiling_status_follows_the_profiler_config(sm: Any, s3: Any) -> None:
    job = unique("profiler")
    body = request(job, put_source(s3, job, "print('ok')\n"))
    body["ProfilerConfig"] = {
        "S3OutputPath": "s3://local-endpoint-tests/profiler",
        "ProfilingIntervalInMilliseconds": 500,
    }
    sm.create_training_job(**body)
    done = wait(sm, job)
    assert done["ProfilerConfig"]["S3OutputPath"] == "s3://local-endpoint-tests/profiler"
    assert done["ProfilingStatus"] == "Enabled"
    assert _shape_problems(done) == ""


def test_tags_from_create_and_the_tag_actions(sm: Any, s3: Any) -> None:
    job = unique("tags")
    body = request(job, put_source(s3, job, "print('ok')\n"))
    body["Tags"] = [{"Key": "team", "Value": "ml"}, {"Key": "cost", "Value": "a"}]
    arn = sm.create_training_job(**body)["TrainingJobArn"]
    assert sm.list_tags(ResourceArn=arn)["Tags"] == body["Tags"]
    added = sm.add_tags(ResourceArn=arn, Tags=[{"Key": "cost", "Value": "b"}, {"Key": "run", "Value": "1"}])
    assert added["Tags"] == [
        {"Key": "team", "Value": "ml"},
        {"Key": "cost", "Value": "b"},
        {"Key": "run", "Value": "1"},
    ]
    sm.delete_tags(ResourceArn=arn, TagKeys=["team", "absent"])
    listed = sm.list_tags(ResourceArn=arn, MaxResults=50)
    assert listed["Tags"] == [{"Key": "cost", "Value": "b"}, {"Key": "run", "Value": "1"}]
    assert "NextToken" not in listed
    assert "Tags" not in wait(sm, job)  # Describe never shows tags, as on SageMaker

    with pytest.raises(ClientError) as err:
        sm.add_tags(ResourceArn=arn, Tags=[{"Key": "aws:reserved", "Value": "x"}])
    assert err.value.response["Error"]["Code"] == "ValidationException"
    too_many = [{"Key": f"k{i}", "Value": "v"} for i in range(49)]
    with pytest.raises(ClientError) as err:
        sm.add_tags(ResourceArn=arn, Tags=too_many)
    assert "at most 50 tags" in err.value.response["Error"]["Message"]
    assert len(sm.list_tags(ResourceArn=arn)["Tags"]) == 2  # the refused call changed nothing
    with pytest.raises(ClientError) as err:
        sm.list_tags(ResourceArn=arn.replace(job, "no-such-job"))
    assert err.value.response["Error"]["Message"] == "Requested resource not found."


@pytest.mark.parametrize(
    ("call", "action"),
    [
        (
            lambda sm: sm.update_training_job(TrainingJobName="x", ResourceConfig={"KeepAlivePeriodInSeconds": 60}),
            "UpdateTrainingJob",
        ),
        (
            lambda sm: sm.list_training_jobs_for_hyper_parameter_tuning_job(HyperParameterTuningJobName="x"),
            "ListTrainingJobsForHyperParameterTuningJob",
        ),
        (lambda sm: sm.list_tags(ResourceArn="arn:aws:sagemaker:us-east-1:123456789012:model/nothing"), "ListTags"),
        (lambda sm: sm.describe_model_package_group(ModelPackageGroupName="x-y"), "DescribeModelPackageGroup"),
    ],
)
def test_unsupported_actions_answer_a_4xx_naming_them(sm: Any, call: Any, action: str) -> None:
    with pytest.raises(ClientError) as err:
        call(sm)
    response = err.value.response
    assert 400 <= response["ResponseMetadata"]["HTTPStatusCode"] < 500
    assert response["ResponseMetadata"]["RetryAttempts"] == 0  # nothing a client would retry
    if response["Error"]["Code"] == "ValidationException" and "not emulated" in response["Error"]["Message"]:
        assert f"SageMaker.{action}" in response["Error"]["Message"]
    else:  # moto answered it itself, with its own 4xx
        assert response["Error"]["Code"] != "InternalFailure"


def test_moto_still_answers_the_sagemaker_actions_it_has(sm: Any) -> None:
    assert "Models" in sm.list_models()


def test_metric_definitions_reach_cloudwatch_and_describe(endpoint: LocalEndpoint, sm: Any, s3: Any) -> None:
    job = unique("metrics")
    script = """
        import os
        host = os.environ["SM_CURRENT_HOST"]
        for step in range(3):
            print(f"step={step} loss={1.0 / (step + 1):.3f} host={host}", flush=True)
        print("accuracy: not-a-number")
        print("accuracy: 0.75")
    """
    body = request(job, put_source(s3, job, script))
    body["AlgorithmSpecification"]["MetricDefinitions"] = [
        {"Name": "train:loss", "Regex": r"loss=([0-9.]+)"},
        {"Name": "accuracy", "Regex": r"accuracy: (\S+)"},
        {"Name": "never", "Regex": r"never-printed=(\d+)"},
    ]
    sm.create_training_job(**body)
    done = wait(sm, job)
    assert done["TrainingJobStatus"] == "Completed", done.get("FailureReason")
    final = {m["MetricName"]: m["Value"] for m in done["FinalMetricDataList"]}
    assert final == {"train:loss": pytest.approx(0.333), "accuracy": 0.75}
    assert _shape_problems(done) == ""

    # exactly the request the SageMaker SDK's TrainingJobAnalytics makes
    cloudwatch = endpoint.client("cloudwatch")
    points = cloudwatch.get_metric_statistics(
        Namespace="/aws/sagemaker/TrainingJobs",
        MetricName="train:loss",
        Dimensions=[{"Name": "TrainingJobName", "Value": job}],
        StartTime=done["TrainingStartTime"],
        EndTime=done["TrainingEndTime"] + datetime.timedelta(minutes=1),
        Period=1,
        Statistics=["Average", "SampleCount"],
    )["Datapoints"]
    assert sum(p["SampleCount"] for p in points) == 9  # 3 lines on each of the 3 hosts
    assert min(p["Average"] for p in points) >= 0.333 - 1e-9


def test_invalid_metric_regex_is_refused(sm: Any, s3: Any) -> None:
    job = unique("badregex")
    body = request(job, put_source(s3, job, "print('ok')\n"))
    body["AlgorithmSpecification"]["MetricDefinitions"] = [{"Name": "loss", "Regex": "loss=(["}]
    with pytest.raises(ClientError) as err:
        sm.create_training_job(**body)
    assert "regular expression of metric loss" in err.value.response["Error"]["Message"]
    with pytest.raises(ClientError):
        sm.describe_training_job(TrainingJobName=job)
