"""operators/budget_steps.py without an endpoint: which stops are the budget's, and failures to tell."""

from __future__ import annotations

from typing import Any
from unittest.mock import MagicMock

from airflow_hetero.job.budget import BUDGET_TAG
from airflow_hetero.job.outcome import TrainingJobBudgetError, TrainingJobLimitError
from airflow_hetero.operators.budget_steps import budget_stop


def limit_error() -> TrainingJobLimitError:
    return TrainingJobLimitError("... (MaxRuntimeExceeded) ...", job_name="j", status="Stopped")


def hook(tags: list[dict[str, str]], secondary: str = "MaxRuntimeExceeded") -> Any:
    fake = MagicMock()
    fake.describe_training_job.return_value = {
        "TrainingJobName": "j",
        "TrainingJobArn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/j",
        "SecondaryStatus": secondary,
        "BillableTimeInSeconds": 61,
    }
    fake.call.return_value = {"Tags": tags}
    return fake


def test_a_job_the_budget_capped_is_the_budgets_stop() -> None:
    err = budget_stop(hook([{"Key": BUDGET_TAG, "Value": "60"}]), limit_error(), MagicMock())
    assert isinstance(err, TrainingJobBudgetError)
    assert "stopped by its budget" in str(err) and "runtime cap of 60 s" in str(err) and err.job_name == "j"


def test_a_job_without_the_tag_keeps_its_limit_error() -> None:
    original = limit_error()
    assert budget_stop(hook([{"Key": "team", "Value": "ml"}]), original, MagicMock()) is original


def test_a_wait_limit_is_not_the_budgets() -> None:
    original = limit_error()
    capped = hook([{"Key": BUDGET_TAG, "Value": "60"}], secondary="MaxWaitTimeExceeded")
    assert budget_stop(capped, original, MagicMock()) is original


def test_an_error_reading_the_tags_keeps_the_limit_error_and_warns() -> None:
    failing = hook([])
    failing.call.side_effect = RuntimeError("AccessDenied: sagemaker:ListTags")
    log = MagicMock()
    original = limit_error()
    assert budget_stop(failing, original, log) is original
    assert "AccessDenied" in str(log.warning.call_args)
