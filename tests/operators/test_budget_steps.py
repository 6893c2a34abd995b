"""operators/budget_steps.py without an endpoint: the cap fit_budget writes and each of its refusals (through a
small fake hook that prices instance types), which stops are the budget's, and failures to tell; the operator
against moto: a refusal in direct mode uploads nothing and creates no job."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import boto3
import pytest
from support.example_jobs import example_job
from support.moto_jobs import MotoJobs, hetero_request, mocked_jobs
from support.task_logs import record_logs

from airflow_hetero._compat import AirflowFailException
from airflow_hetero.amounts import format_amount
from airflow_hetero.job.budget import BUDGET_TAG
from airflow_hetero.job.outcome import TrainingJobBudgetError, TrainingJobLimitError
from airflow_hetero.operators import HeteroTrainingOperator
from airflow_hetero.operators.budget_steps import budget_stop, fit_budget
from airflow_hetero.pricing.price_list import Price, unknown
from airflow_hetero.pricing.settings import PriceSettings


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


# --- fit_budget: the request the operator sends, or the task's refusal -----------------------------------------

PER_HOUR = {"ml.c5.xlarge": 0.2, "ml.p4d.24xlarge": 36.0}


class PricingHook:
    """A hook that prices instance types as ``training_prices`` does (a Price, or an unknown one and why)."""

    def __init__(self, prices: dict[str, float | None], reason: str = "not in the Price List") -> None:
        self.prices, self.reason = prices, reason
        self.asked: list[tuple[list[str], PriceSettings]] = []

    def training_prices(self, instance_types: list[str], settings: PriceSettings) -> dict[str, Price]:
        self.asked.append((list(instance_types), settings))
        return {
            t: Price(t, p, settings.currency) if p is not None else unknown(t, settings.currency, self.reason)
            for t in instance_types
            for p in (self.prices.get(t),)
        }


def training_request(max_run: int = 86400) -> dict[str, Any]:
    groups = [
        {"InstanceGroupName": "data", "InstanceType": "ml.c5.xlarge", "InstanceCount": 2},
        {"InstanceGroupName": "train", "InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1},
    ]
    return {
        "TrainingJobName": "job-1",
        "ResourceConfig": {"InstanceGroups": groups},
        "StoppingCondition": {"MaxRuntimeInSeconds": max_run},
    }


def fit(hook: Any, max_cost: Any, earlier: list[dict[str, Any]] | None = None, **kwargs: Any) -> dict[str, Any]:
    options: dict[str, Any] = {
        "settings": PriceSettings(),
        "min_runtime": 300,
        "stop_window": 120,
        "task_id": "train",
        "log": MagicMock(),
        **kwargs,
    }
    return fit_budget(hook, training_request(), earlier or [], max_cost=max_cost, **options)


@pytest.mark.parametrize("max_cost", [None, ""])
def test_without_a_budget_the_request_goes_as_it_is_and_nothing_is_priced(max_cost: Any) -> None:
    hook = PricingHook(PER_HOUR)
    assert fit(hook, max_cost) == training_request()
    assert hook.asked == []


def test_the_request_sent_is_capped_and_tagged_and_the_log_says_the_plan() -> None:
    hook, log = PricingHook(PER_HOUR), MagicMock()
    sent = fit(hook, "10", log=log, settings=PriceSettings.of({"ml.c5.xlarge": 0.2}, "EUR"))  # a rendered template
    rate = 2 * 0.2 + 36.0
    cap = math.floor(10 * 3600 / rate) - 120
    assert sent["StoppingCondition"] == {"MaxRuntimeInSeconds": cap}
    assert sent["Tags"] == [{"Key": BUDGET_TAG, "Value": str(cap)}]
    assert hook.asked[0][0] == ["ml.c5.xlarge", "ml.p4d.24xlarge"] and hook.asked[0][1].currency == "EUR"
    line = log.info.call_args.args[1]
    assert (
        line.startswith(f"Budget: cluster {format_amount(rate)} EUR/hour; max_cost 10 EUR")
        and "(lowered from 86400)" in line
    )


def test_earlier_jobs_are_priced_and_their_cost_lowers_the_cap() -> None:
    earlier = {**training_request(), "TrainingJobStatus": "Failed", "BillableTimeInSeconds": 360}
    earlier["ResourceConfig"] = {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 2}  # a homogeneous try
    hook = PricingHook({**PER_HOUR, "ml.p5.48xlarge": 60.0})
    sent = fit(hook, 50.0, [earlier, {**training_request(), "TrainingJobStatus": "Stopped"}])
    rate, spent = 2 * 0.2 + 36.0, 360 * 2 * 60.0 / 3600
    assert sent["StoppingCondition"]["MaxRuntimeInSeconds"] == math.floor((50 - spent) * 3600 / rate) - 120
    assert hook.asked[0][0] == ["ml.c5.xlarge", "ml.p4d.24xlarge", "ml.p5.48xlarge"]  # each type once


def test_the_stop_window_given_is_paid_for() -> None:
    wide = fit(PricingHook(PER_HOUR), 10.0, stop_window=600)["StoppingCondition"]["MaxRuntimeInSeconds"]
    assert wide == math.floor(10 * 3600 / (2 * 0.2 + 36.0)) - 600


@pytest.mark.parametrize("max_cost", [0, -5, "ten", True, float("nan")])
def test_a_bad_max_cost_fails_the_task_without_retries(max_cost: Any) -> None:
    with pytest.raises(AirflowFailException, match=r"^Task train: budget: max_cost must be a positive number"):
        fit(PricingHook(PER_HOUR), max_cost)


def test_an_unknown_price_fails_the_task_naming_the_type_and_the_sources() -> None:
    hook = PricingHook({"ml.c5.xlarge": 0.2}, reason="the Price List Query API was not asked")
    settings = PriceSettings.of({"ml.c5.xlarge": 0.2}, use_pricing_api=False)
    with pytest.raises(AirflowFailException) as info:
        fit(hook, 10.0, settings=settings)
    message = str(info.value)
    assert message.startswith("Task train: budget: no price for ml.p4d.24xlarge: the Price List Query API was not")
    assert "sources tried: prices= (ml.c5.xlarge); the Price List Query API was not asked (use_pricing_api=False)" in (
        message
    )
    assert "nothing was submitted" in message


def test_a_budget_below_the_minimum_runtime_fails_the_task() -> None:
    with pytest.raises(
        AirflowFailException, match=r"^Task train: budget: max_cost 1 USD: .*minimum useful run of 600 s"
    ):
        fit(PricingHook(PER_HOUR), 1.0, min_runtime=600)  # buys 98 s - 120 s: nothing
    assert fit(PricingHook(PER_HOUR), 10.0, min_runtime=600)["StoppingCondition"]["MaxRuntimeInSeconds"] >= 600


# --- the operator in direct mode: a refusal uploads nothing and creates no job (moto) --------------------------

#: max_cost 0.01 buys about 1 s of the example cluster (2 x ml.c5.xlarge + 1 x ml.p3.2xlarge): below the minimum.
TOO_SMALL = 0.01
EXAMPLE_PRICES = {"ml.c5.xlarge": 0.2, "ml.p3.2xlarge": 3.8}


@pytest.fixture
def jobs(monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoJobs]:
    with mocked_jobs(monkeypatch) as jobs:
        yield jobs


def budget_operator(tmp_path: Path, deferrable: bool, **kwargs: Any) -> HeteroTrainingOperator:
    """A direct-mode task in a DAG file at ``tmp_path`` (relative paths resolve there), priced offline."""
    from airflow.providers.common.compat.sdk import DAG

    with DAG("budget", schedule=None) as dag:
        op = HeteroTrainingOperator(
            task_id="train",
            aws_conn_id=None,
            max_cost=TOO_SMALL,
            prices=PriceSettings.of(EXAMPLE_PRICES, use_pricing_api=False),
            deferrable=deferrable,
            print_log=False,
            check_interval=0.01,
            **kwargs,
        )
    dag.fileloc = str(tmp_path / "dag.py")
    return op


def budget_context() -> dict[str, Any]:
    return {"ti": MagicMock(dag_id="budget", task_id="train", run_id="r1", map_index=-1), "run_id": "r1"}


def refused(op: HeteroTrainingOperator) -> str:
    with pytest.raises(AirflowFailException) as info:
        op.execute(budget_context())
    message = str(info.value)
    assert message.startswith("Task train: budget: max_cost 0.01 USD") and "minimum useful run of 300 s" in message
    assert "nothing was submitted" in message
    return message


def s3_keys() -> list[str]:
    s3 = boto3.client("s3", region_name="us-east-1")
    return [
        f"{bucket['Name']}/{item['Key']}"
        for bucket in s3.list_buckets()["Buckets"]
        for item in s3.list_objects_v2(Bucket=bucket["Name"]).get("Contents", [])
    ]


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
def test_a_refused_budget_uploads_no_local_code_and_creates_no_job(
    jobs: MotoJobs, tmp_path: Path, deferrable: bool
) -> None:
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="bucket")  # the job's output_path bucket
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text("print('hello')\n")
    op = budget_operator(tmp_path, deferrable, job=example_job("budget-job", source_dir="code"))
    logged = record_logs(op)
    refused(op)
    assert s3_keys() == []  # sourcedir.tar.gz was never uploaded
    assert jobs.calls["CreateTrainingJob"] == 0 and jobs.names() == []
    assert "Uploaded training code" not in logged.text()


def test_a_refused_budget_runs_no_s3_operations_of_a_request(jobs: MotoJobs, tmp_path: Path) -> None:
    """Request mode: the Amazon provider's S3Operations (a bucket, an upload) wait for the budget too."""
    (tmp_path / "train.csv").write_text("1,2\n")
    operations = {
        "S3CreateBucket": [{"Bucket": "staging-bucket"}],
        "S3Upload": [{"Path": "train.csv", "Bucket": "staging-bucket", "Key": "in/train.csv", "Tar": False}],
    }
    op = budget_operator(tmp_path, False, request=hetero_request("budget-job", S3Operations=operations))
    refused(op)
    assert boto3.client("s3", region_name="us-east-1").list_buckets()["Buckets"] == []  # not even the bucket
    assert jobs.calls["CreateTrainingJob"] == 0 and jobs.names() == []
