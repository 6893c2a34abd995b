"""HeteroLogSummaryOperator with mock_aws (and once through HTTPS and a proxy) and a plain context."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws
from support.log_jobs import create_job, put_stream, put_utilization, resource_config_line

from airflow_hetero._compat import AIRFLOW_V_3, AirflowFailException
from airflow_hetero.amounts import format_amount
from airflow_hetero.logs.report import format_report
from airflow_hetero.operators.log_summary import HeteroLogSummaryOperator
from airflow_hetero.runtime import format_marker

TYPES = {"data_group": "ml.c5.xlarge", "dnn_group": "ml.p3.2xlarge"}
LAYOUT = {"data_group": ["algo-2"], "dnn_group": ["algo-3", "algo-1"]}


@pytest.fixture
def job() -> Iterator[str]:
    with mock_aws():
        region = {"region_name": "us-east-1"}
        create_job(
            boto3.client("sagemaker", **region),
            "summ",
            [("data_group", TYPES["data_group"], 1), ("dnn_group", TYPES["dnn_group"], 2)],
        )
        logs = boto3.client("logs", **region)
        put_stream(
            logs,
            "summ/algo-2-1700000000",
            [
                "SM_CURRENT_HOST=algo-2",
                "SM_CURRENT_INSTANCE_GROUP=data_group",
                resource_config_line(LAYOUT, "algo-2", TYPES),
                "serving batches",
            ],
        )
        put_stream(
            logs,
            "summ/algo-1-1700000000",
            [
                format_marker("algo-1", "dnn_group", TYPES["dnn_group"]),
                "Traceback (most recent call last):",
                '  File "train.py", line 1',
                "RuntimeError: NCCL error: unhandled system error",
            ],
        )
        put_stream(logs, "summ/algo-3-1700000000", ["worker up"] + [f"line {i}" for i in range(40)])
        # moto's job trains for 0 s at creation: a datapoint at TrainingStartTime is in the window
        started = boto3.client("sagemaker", **region).describe_training_job(TrainingJobName="summ")
        at = started["TrainingStartTime"] + timedelta(minutes=1)
        put_utilization(boto3.client("cloudwatch", **region), "summ", "algo-1", "GPUUtilization", [12.0], at)
        yield "summ"


def run(**kwargs: Any) -> tuple[dict[str, Any], MagicMock]:
    ti = MagicMock(dag_id="d", run_id="r", task_id="summary", map_index=-1)
    operator = HeteroLogSummaryOperator(task_id="summary", aws_conn_id=None, region_name="us-east-1", **kwargs)
    return operator.execute({"ti": ti}), ti  # type: ignore[arg-type]


def test_pushes_the_summary_with_each_group_once_and_logs_the_table(
    job: str, capsys: pytest.CaptureFixture[str]
) -> None:
    summary, ti = run(job_name=job, tail_lines=5)
    json.dumps(summary)
    assert summary["training_job_name"] == "summ" and summary["status"] == "Completed"
    assert summary["groups"]["data_group"]["hosts"] == ["algo-2"]
    assert summary["groups"]["dnn_group"]["hosts"] == ["algo-1", "algo-3"]
    assert summary["groups"]["dnn_group"]["errors"] == 1
    assert summary["groups"]["dnn_group"]["tail"]["algo-3"][-1] == "line 39"
    assert len(summary["groups"]["dnn_group"]["tail"]["algo-3"]) == 5
    assert summary["api_calls"]["GetMetricData"] == 1
    pushed = {call.kwargs["key"]: call.kwargs["value"] for call in ti.xcom_push.call_args_list}
    assert pushed == {  # the groups are in return_value only: no group_<name> copies
        "verdict": summary["verdict"],
        "cost": summary["cost"],  # new with the cost per group (moto has no Pricing API: costs unknown)
        # Airflow 3 reads the link's URL from an XCom; Airflow 2 calls get_link instead
        **(
            {"_link_InstanceGroupsLink": "/hetero/instance-groups?dag_id=d&run_id=r&task_id=summary&map_index=-1"}
            if AIRFLOW_V_3
            else {}
        ),
    }
    assert summary["groups"]["dnn_group"]["utilization"]["gpu"] == {
        "avg": 12.0,
        "max": 12.0,
        "hosts": 1,
        "datapoints": 1,
        "unit": "% of all GPUs",  # ml.p3.2xlarge: 1 GPU, so the figure is SageMaker's
    }
    logged = capsys.readouterr().out  # the task log (structlog writes to stdout here)
    assert "Log summary of summ" in logged
    logs_row, util_row = [line for line in logged.splitlines() if line.startswith("dnn_group ")][:2]
    assert "algo-1,algo-3" in logs_row and "12/12" in util_row  # logs table, then utilisation table
    # one GPU datapoint (12 % of ml.p3.2xlarge's one GPU) and no CPU figures: nobody is saturated
    assert summary["verdict"]["kind"] == "not_saturated"
    assert "Verdict: No group is saturated (busiest: dnn_group GPUs at 12%)" in logged


def test_without_metrics_and_with_a_tight_bound(job: str) -> None:
    summary, _ = run(job_name=job, include_metrics=False, max_xcom_bytes=2048)
    assert "GetMetricData" not in summary["api_calls"]
    assert summary["groups"]["dnn_group"]["utilization"] is None
    assert len(json.dumps(summary)) <= 2048
    assert summary["truncated"]["tail"]["lines_dropped"] > 0
    assert summary["verdict"]["kind"] == "no_data"


def test_custom_error_patterns(job: str) -> None:
    summary, _ = run(job_name=job, error_patterns=[r"^worker up$"], include_metrics=False)
    assert summary["groups"]["dnn_group"]["errors"] == 1
    assert summary["groups"]["dnn_group"]["error_samples"][0]["host"] == "algo-3"


def test_arguments_are_checked_when_the_dag_is_parsed() -> None:
    assert HeteroLogSummaryOperator.template_fields == ("job_name", "aws_conn_id", "region_name", "verify")
    with pytest.raises(ValueError, match="invalid pattern"):
        HeteroLogSummaryOperator(task_id="s", job_name="j", error_patterns=["(bad"])
    with pytest.raises(ValueError, match="tail_lines"):
        HeteroLogSummaryOperator(task_id="s", job_name="j", tail_lines=-1)
    with pytest.raises(ValueError, match="max_xcom_bytes"):
        HeteroLogSummaryOperator(task_id="s", job_name="j", max_xcom_bytes=100)
    with pytest.raises(ValueError, match="unknown verdict threshold"):
        HeteroLogSummaryOperator(task_id="s", job_name="j", verdict_thresholds={"busy": 80})
    with pytest.raises(ValueError, match="idle_percent <= waiting_percent < busy_percent"):
        HeteroLogSummaryOperator(task_id="s", job_name="j", verdict_thresholds={"waiting_percent": 95})
    with pytest.raises(ValueError, match="series_points"):
        HeteroLogSummaryOperator(task_id="s", job_name="j", series_points=0)


def test_unknown_job_and_empty_name_fail(job: str) -> None:
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError):
        run(job_name="no-such-job")
    with pytest.raises(ValueError, match="rendered empty"):
        run(job_name="")


def test_prices_and_currency_override_and_are_checked_at_parse_time(job: str) -> None:
    summary, _ = run(
        job_name=job, prices={"ml.c5.xlarge": 0.2, "ml.p3.2xlarge": 3.0}, currency="EUR", use_pricing_api=False
    )
    cost = summary["cost"]
    assert cost["currency"] == "EUR" and cost["prices"]["ml.p3.2xlarge"] == {
        "per_hour": 3.0,
        "currency": "EUR",
        "source": "override",
    }
    seconds = summary["groups"]["dnn_group"]["instance_seconds"]
    assert cost["groups"]["dnn_group"]["cost"] == pytest.approx(seconds * 3.0 / 3600, abs=1e-4)
    effect = summary["verdict"]["groups"]["dnn_group"]["effect"]  # over-provisioned: 2 -> 1
    assert effect["per_hour"] == -3.0 and effect["currency"] == "EUR"
    only_one, _ = run(job_name=job, prices={"ml.c5.xlarge": 0.2}, currency="EUR", use_pricing_api=False)
    assert only_one["cost"]["total"] is None
    assert only_one["cost"]["groups"]["dnn_group"]["reason"] == (
        "prices= has no EUR price for it (the Price List is in USD)"
    )
    for bad in ({"prices": {"p3": 1.0}}, {"prices": {"ml.p3.2xlarge": -1}}, {"currency": "euro"}):
        with pytest.raises(ValueError):
            HeteroLogSummaryOperator(task_id="s", job_name="j", **bad)


def test_a_summary_cut_to_its_skeleton_pushes_no_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    """Five groups with long names and a 2 KiB bound: only the job's status and counts fit."""
    with mock_aws():
        sagemaker = boto3.client("sagemaker", region_name="us-east-1")
        create_job(sagemaker, "skel", [(f"g{i}" * 16, "ml.c5.xlarge", 1) for i in range(5)])
        summary, ti = run(job_name="skel", max_xcom_bytes=2048)
    assert "unmapped" not in summary and "verdict" not in summary  # the skeleton
    assert summary["truncated"]["other"][-1] == "everything but the job's status and counts"
    assert len(json.dumps(summary)) <= 2048
    pushed = {call.kwargs["key"] for call in ti.xcom_push.call_args_list}
    assert "verdict" not in pushed and "cost" not in pushed
    assert "Verdict: none (the summary was cut to its skeleton" in capsys.readouterr().out


def test_training_task_id_finds_the_job_its_task_created(job: str) -> None:
    ti = MagicMock(dag_id="d", run_id="r", task_id="summary", map_index=-1)
    ti.xcom_pull.return_value = job
    operator = HeteroLogSummaryOperator(
        task_id="summary", training_task_id="train", aws_conn_id=None, region_name="us-east-1", include_metrics=False
    )
    summary = operator.execute({"ti": ti})  # type: ignore[arg-type]
    assert summary["training_job_name"] == job
    assert ti.xcom_pull.call_args_list[0].kwargs == {"task_ids": "train", "key": "training_job_name"}
    assert "capacity_attempts" not in summary  # the task pushed none that reads as attempts
    ti.xcom_pull.return_value = None  # the training task failed before it created a job
    with pytest.raises(AirflowFailException, match="training_task_id='train': that task pushed no 'training_job_name'"):
        operator.execute({"ti": ti})  # type: ignore[arg-type]
    for both_or_neither in ({}, {"job_name": "j", "training_task_id": "train"}):
        with pytest.raises(ValueError, match="give job_name or training_task_id"):
            HeteroLogSummaryOperator(task_id="s", **both_or_neither)


def test_a_connection_behind_a_private_ca_and_a_proxy_is_summarised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The endpoint's certificate is in no public trust store and its host is known only to the proxy:
    the summary reads it with ``verify`` (the CA bundle) and ``botocore_config`` (the proxy), as training does."""
    from botocore.config import Config
    from support.moto_jobs import aws_connection_env
    from support.tls_endpoint import tls_moto_endpoint

    with tls_moto_endpoint(tmp_path) as endpoint:
        config = {"proxies": {"https": endpoint.proxy}, "connect_timeout": 7, "retries": {"total_max_attempts": 2}}
        proxied = Config(proxies={"https": endpoint.proxy})
        reach = {"endpoint_url": endpoint.url, "verify": str(endpoint.ca_bundle), "config": proxied}
        create_job(boto3.client("sagemaker", **reach), "summ-tls", [("solo", "ml.c5.xlarge", 1)])
        put_stream(boto3.client("logs", **reach), "summ-tls/algo-1-1700000000", ["SM_CURRENT_HOST=algo-1", "hello"])
        monkeypatch.setenv(*aws_connection_env("private_ca", endpoint.url))
        operator = HeteroLogSummaryOperator(
            task_id="summary",
            job_name="summ-tls",
            aws_conn_id="private_ca",
            verify=str(endpoint.ca_bundle),
            botocore_config=config,
            use_pricing_api=False,
        )
        summary = operator.execute({"ti": MagicMock()})  # type: ignore[arg-type]
        hook = operator.make_hook()
        for client in (hook.conn, hook.logs_client, hook.cloudwatch_client):
            assert client.meta.config.proxies == config["proxies"]
            assert client.meta.config.connect_timeout == 7
            assert client._endpoint.http_session._verify == str(endpoint.ca_bundle)
    assert summary["status"] == "Completed" and summary["groups"]["solo"]["hosts"] == ["algo-1"]
    assert summary["api_calls"]["GetMetricData"] == 1  # CloudWatch, too, through the proxy
    assert {tunnel.partition(":")[0] for tunnel in endpoint.tunnels} == {"sagemaker.hetero.test"}


FAILED_ATTEMPT = {
    "job_name": "summ-first",
    "instance_groups": [
        {"name": "data_group", "type": "ml.c5.xlarge", "count": 1},
        {"name": "dnn_group", "type": "ml.p4d.24xlarge", "count": 1},
    ],
    "reason": "CapacityError: Unable to provision requested ML compute capacity. Please retry using a different "
    "ML instance type.",
}


def test_a_job_that_fell_back_shows_the_types_that_ran_the_fallback_and_only_its_own_cost(
    job: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The training task fell back from 1 x ml.p4d.24xlarge to 2 x ml.p3.2xlarge (the fixture's job)."""
    ti = MagicMock(dag_id="d", run_id="r", task_id="summary", map_index=-1)
    # the training task did not right-size (no "rightsizing" key): the summary records nothing for it
    pushed = {"training_job_name": job, "capacity_attempts": [FAILED_ATTEMPT], "rightsizing": None}
    ti.xcom_pull.side_effect = lambda task_ids, key: pushed.get(key)  # None for a key never pushed
    prices = {"ml.c5.xlarge": 0.2, "ml.p3.2xlarge": 3.0, "ml.p4d.24xlarge": 40.0}
    operator = HeteroLogSummaryOperator(
        task_id="summary",
        training_task_id="train",
        aws_conn_id=None,
        region_name="us-east-1",
        prices=prices,
        use_pricing_api=False,
    )
    summary = operator.execute({"ti": ti})  # type: ignore[arg-type]
    assert summary["capacity_attempts"] == [FAILED_ATTEMPT]
    assert summary["groups"]["dnn_group"]["instance_type"] == "ml.p3.2xlarge"
    assert summary["groups"]["dnn_group"]["instance_count"] == 2
    cost = summary["cost"]
    assert cost["groups"]["dnn_group"]["instance_type"] == "ml.p3.2xlarge"
    assert "ml.p4d.24xlarge" not in cost["prices"]  # the failed attempt is not priced, let alone counted
    alone, _ = run(job_name=job, prices=prices, use_pricing_api=False)  # the same job, no fallback known
    assert cost["total"] == alone["cost"]["total"] and cost["groups"] == alone["cost"]["groups"]
    assert [k for k in summary if k != "capacity_attempts"] == list(alone)  # otherwise the same shape
    logged = " ".join(line.strip() for line in capsys.readouterr().out.splitlines())  # wrapped at 100
    assert (
        "Capacity: dnn_group fell back 1 x ml.p4d.24xlarge -> 2 x ml.p3.2xlarge (1 attempt failed: CapacityError)"
        in logged
    )
    assert "Capacity:" not in format_report(alone)


EARLIER = "AWSBatchsumm" + "1" * 32  # the service job's first attempt; the fixture's job "summ" is its second
SM_ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-job/"


def queued_service_job() -> dict[str, Any]:
    # a training job's ARN has its name in lower case; the summary names each attempt as its Describe does
    arns = [SM_ARN + n.lower() for n in (EARLIER, "summ")]
    attempts = [{"serviceResourceId": {"name": "TrainingJobArn", "value": arn}} for arn in arns]
    return {
        "jobId": "id-1",
        "jobName": "summ",
        "jobArn": "arn:aws:batch:us-east-1:123456789012:job/id-1",
        "jobQueue": "gpu-queue",
        "serviceJobType": "SAGEMAKER_TRAINING",
        "status": "SUCCEEDED",
        "createdAt": 1767225600000,
        "startedAt": 1767225600000,
        "attempts": attempts,
        "latestAttempt": attempts[-1],
    }


def earlier_training_job() -> dict[str, Any]:
    """The first attempt: billed 600 s on 1 x ml.c5.xlarge and 2 x ml.p3.2xlarge, then failed (Batch retried)."""
    groups = [("data_group", "ml.c5.xlarge", 1), ("dnn_group", "ml.p3.2xlarge", 2)]
    return {
        "TrainingJobName": EARLIER,
        "TrainingJobArn": SM_ARN + EARLIER.lower(),
        "ModelArtifacts": {"S3ModelArtifacts": "s3://bucket/out"},
        "TrainingJobStatus": "Failed",
        "FailureReason": "AlgorithmError: NCCL error",
        "SecondaryStatus": "Failed",
        "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "img"},
        "ResourceConfig": {
            "InstanceGroups": [{"InstanceGroupName": n, "InstanceType": t, "InstanceCount": c} for n, t, c in groups],
            "VolumeSizeInGB": 30,
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": 7200},
        "CreationTime": datetime(2026, 1, 1, tzinfo=UTC),
        "BillableTimeInSeconds": 600,
    }


def queued_summary(
    monkeypatch: pytest.MonkeyPatch, describe_fails: bool = False
) -> tuple[dict[str, Any], MagicMock, Stubber, Stubber]:
    """The summary operator on a queued training task: Batch and the earlier attempt's DescribeTrainingJob on
    botocore Stubbers (checked against the models), the summarised job on moto."""
    keys = {"a": "a", "b": "b"}
    batch = boto3.client("batch", region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b")
    sagemaker = boto3.client(
        "sagemaker", region_name="us-east-1", aws_access_key_id=keys["a"], aws_secret_access_key="b"
    )
    batch_stub, sm_stub = Stubber(batch), Stubber(sagemaker)
    if describe_fails:
        batch_stub.add_client_error("describe_service_job", "ClientException", "no such job", 400, {"jobId": "id-1"})
    else:
        batch_stub.add_response("describe_service_job", queued_service_job(), {"jobId": "id-1"})
        sm_stub.add_response("describe_training_job", earlier_training_job(), {"TrainingJobName": EARLIER.lower()})
    from airflow_hetero.hooks.training import HeteroTrainingHook

    monkeypatch.setattr(
        HeteroTrainingHook,
        "describe_training_job",
        lambda _, name: sagemaker.describe_training_job(TrainingJobName=name),
    )
    operator = HeteroLogSummaryOperator(
        task_id="summary",
        training_task_id="train",
        aws_conn_id=None,
        region_name="us-east-1",
        prices={"ml.c5.xlarge": 0.2, "ml.p3.2xlarge": 3.0},
        use_pricing_api=False,
    )
    hook = operator.make_batch_hook()
    hook.__dict__.update(conn=batch)
    monkeypatch.setattr(operator, "make_batch_hook", lambda: hook)
    ti = MagicMock(dag_id="d", run_id="r", task_id="summary", map_index=-1)
    pushed = {"training_job_name": "summ", "service_job": {"job_id": "id-1", "job_name": "summ"}}
    ti.xcom_pull.side_effect = lambda task_ids, key: pushed.get(key)
    with batch_stub, sm_stub:
        summary = operator.execute({"ti": ti})  # type: ignore[arg-type]
        batch_stub.assert_no_pending_responses()
        sm_stub.assert_no_pending_responses()
    return dict(summary), ti, batch_stub, sm_stub


def test_a_queued_job_summarises_the_latest_attempt_and_costs_every_attempt(
    job: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    summary, ti, _, _ = queued_summary(monkeypatch)
    assert summary["training_job_name"] == "summ"  # the latest attempt's logs and groups
    latest = summary["cost"]["total"]
    assert latest is not None
    earlier = round(600 * (1 * 0.2 + 2 * 3.0) / 3600, 4)  # BillableTimeInSeconds x the cluster's price per hour
    queue = summary["queue_attempts"]
    assert queue["attempts"] == [
        {"training_job": EARLIER, "status": "Failed", "billable_seconds": 600, "cost": earlier},
        {
            "training_job": "summ",
            "status": "Completed",
            "billable_seconds": summary.get("billable_seconds"),
            "cost": latest,
        },
    ]
    assert queue["earlier_cost"] == earlier and queue["total"] == round(earlier + latest, 4)
    assert (queue["service_job"], queue["job_id"], queue["job_queue"], queue["currency"]) == (
        "summ",
        "id-1",
        "gpu-queue",
        "USD",
    )
    pushed = {c.kwargs["key"]: c.kwargs["value"] for c in ti.xcom_push.call_args_list}
    assert pushed["cost"] == {**summary["cost"], "attempts": 2, "attempts_total": queue["total"]}
    logged = " ".join(line.strip() for line in capsys.readouterr().out.splitlines())
    assert (
        f"Queue: service job summ (id-1) in gpu-queue, 2 attempts; earlier attempts cost {format_amount(earlier)} USD, "
        f"all attempts {format_amount(queue['total'])} USD" in logged
    )


def test_a_service_job_that_cannot_be_read_leaves_the_summary_as_it_was(
    job: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    summary, ti, _, _ = queued_summary(monkeypatch, describe_fails=True)
    alone, _ = run(job_name=job)
    assert "queue_attempts" not in summary and list(summary) == list(alone)
    pushed = {c.kwargs["key"]: c.kwargs["value"] for c in ti.xcom_push.call_args_list}
    assert "attempts_total" not in pushed.get("cost", {})
    out = capsys.readouterr()
    logged = caplog.text + out.out + out.err  # the task log: stdout on Airflow 3, logging on 2.11
    assert "Queue: could not read service job id-1" in logged and "no such job" in logged
