"""The AWS Batch facts in sagemaker_facts say what botocore's ``batch`` model says (DESIGN.md section 10)."""

from __future__ import annotations

import re

import botocore.session
import pytest

from airflow_hetero import sagemaker_facts as facts


@pytest.fixture(scope="module")
def batch() -> object:
    return botocore.session.get_session().get_service_model("batch")


def _doc(model: object, shape: str, member: str) -> str:
    return str(model.shape_for(shape).members[member].documentation)  # type: ignore[attr-defined]


def test_names_limits_and_pattern(batch: object) -> None:
    doc = _doc(batch, "SubmitServiceJobRequest", "jobName")
    assert f"up to {facts.BATCH_NAME_MAX_LENGTH} characters" in doc
    assert "hyphens (-), and underscores (_)" in doc
    assert re.fullmatch(facts.BATCH_NAME_PATTERN, "a" * facts.BATCH_NAME_MAX_LENGTH)
    assert not re.fullmatch(facts.BATCH_NAME_PATTERN, "a" * (facts.BATCH_NAME_MAX_LENGTH + 1))
    assert not re.fullmatch(facts.BATCH_NAME_PATTERN, "a.b")


def test_priority_retry_token_and_time_limit_bounds(batch: object) -> None:
    assert f"between {facts.BATCH_PRIORITY_MIN} and {facts.BATCH_PRIORITY_MAX}" in _doc(
        batch, "SubmitServiceJobRequest", "schedulingPriority"
    )
    assert f"between {facts.BATCH_RETRY_ATTEMPTS_MIN} and {facts.BATCH_RETRY_ATTEMPTS_MAX} attempts" in _doc(
        batch, "ServiceJobRetryStrategy", "attempts"
    )
    token = batch.shape_for("SubmitServiceJobRequest").members["clientToken"]  # type: ignore[attr-defined]
    assert token.metadata["max"] == facts.BATCH_CLIENT_TOKEN_MAX_LENGTH
    limit = _doc(batch, "JobStateTimeLimitAction", "maxTimeSeconds")
    assert f"minimum value is {facts.BATCH_TIME_LIMIT_MIN_SECONDS}" in limit
    assert f"{facts.BATCH_TIME_LIMIT_MAX_SECONDS:,}" in limit
    action = batch.shape_for("JobStateTimeLimitAction")  # type: ignore[attr-defined]
    assert facts.BATCH_TIME_LIMIT_STATE in action.members["state"].enum
    assert facts.BATCH_TIME_LIMIT_ACTION in action.members["action"].enum


def test_statuses_are_the_models(batch: object) -> None:
    enum = batch.shape_for("ServiceJobStatus").enum  # type: ignore[attr-defined]
    assert set(facts.BATCH_JOB_STATUSES) <= set(enum)
    assert set(facts.BATCH_JOB_STATUSES) >= facts.BATCH_FINAL_STATUSES
    assert set(facts.BATCH_STATUS_FOR_SECONDARY.values()) | set(facts.BATCH_STATUS_FOR_TRAINING_STATUS.values()) <= set(
        facts.BATCH_JOB_STATUSES
    )
    assert "only <code>RUNNING</code> jobs are returned" in _doc(batch, "ListServiceJobsRequest", "jobStatus")


def test_training_job_name_budget() -> None:
    sagemaker = botocore.session.get_session().get_service_model("sagemaker")
    name = sagemaker.shape_for("CreateTrainingJobRequest").members["TrainingJobName"]
    assert name.metadata["max"] == facts.TRAINING_JOB_NAME_MAX_LENGTH
    assert facts.BATCH_PAYLOAD_TRAINING_JOB_NAME_MAX_LENGTH == 23
    longest = facts.BATCH_TRAINING_JOB_PREFIX + "n" * 23 + "0" * facts.BATCH_ATTEMPT_ID_HEX_LENGTH
    assert len(longest) == facts.TRAINING_JOB_NAME_MAX_LENGTH


def test_capacity_unit_and_types(batch: object) -> None:
    assert facts.BATCH_CAPACITY_UNIT in _doc(batch, "CapacityLimit", "capacityUnit")
    assert batch.shape_for("ServiceJobType").enum == [facts.BATCH_SAGEMAKER_TRAINING]  # type: ignore[attr-defined]
    assert f"between 1 and {facts.BATCH_LIST_MAX_RESULTS}" in _doc(batch, "ListServiceJobsRequest", "maxResults")
