"""Build training jobs, log streams and instance metrics in moto for the log-summary tests."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from support.service_model import check_answer

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
NAMESPACE = "/aws/sagemaker/TrainingJobs"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"


def now_ms() -> int:
    """Current time in ms (moto drops events older than 14 days or more than 2 hours ahead)."""
    return int(time.time() * 1000)


def create_job(sagemaker: Any, name: str, groups: Iterable[tuple[str, str, int]]) -> None:
    """A heterogeneous job in moto (moto makes it Completed at once)."""
    sagemaker.create_training_job(
        TrainingJobName=name,
        RoleArn=ROLE,
        AlgorithmSpecification={"TrainingImage": "img", "TrainingInputMode": "File"},
        OutputDataConfig={"S3OutputPath": "s3://bucket/out"},
        ResourceConfig={
            "InstanceGroups": [{"InstanceGroupName": g, "InstanceType": t, "InstanceCount": n} for g, t, n in groups],
            "VolumeSizeInGB": 30,
        },
        StoppingCondition={"MaxRuntimeInSeconds": 3600},
    )


def ensure_group(logs: Any) -> None:
    """The SageMaker training log group (created once)."""
    with contextlib.suppress(logs.exceptions.ResourceAlreadyExistsException):
        logs.create_log_group(logGroupName=LOG_GROUP)


def put_stream(logs: Any, stream: str, lines: Iterable[str], start_ms: int | None = None) -> int:
    """Create ``stream`` and put ``lines`` as one event each (batches of 10,000); returns the count."""
    ensure_group(logs)
    logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
    start = start_ms if start_ms is not None else now_ms() - 60_000
    batch: list[dict[str, Any]] = []
    count = 0
    for i, line in enumerate(lines):
        batch.append({"timestamp": start + i // 100, "message": line})
        count += 1
        if len(batch) == 10_000:
            logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=stream, logEvents=batch)
            batch = []
    if batch:
        logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=stream, logEvents=batch)
    return count


def resource_config_line(layout: dict[str, list[str]], current: str, types: dict[str, str]) -> str:
    """The toolkit's ``SM_RESOURCE_CONFIG=`` line for ``current`` in a job laid out as ``layout``."""
    group = next(g for g, hosts in layout.items() if current in hosts)
    config = {
        "current_group_name": group,
        "current_host": current,
        "current_instance_type": types[group],
        "hosts": sorted(h for hosts in layout.values() for h in hosts),
        "instance_groups": [
            {"hosts": hosts, "instance_group_name": g, "instance_type": types[g]} for g, hosts in layout.items()
        ],
        "network_interface_name": "eth0",
    }
    return "SM_RESOURCE_CONFIG=" + json.dumps(config, separators=(",", ":"))


def put_utilization(cloudwatch: Any, job: str, host: str, metric: str, values: list[float], end: datetime) -> None:
    """One datapoint a minute for ``host``, the last one a minute before ``end``."""
    cloudwatch.put_metric_data(
        Namespace=NAMESPACE,
        MetricData=[
            {
                "MetricName": metric,
                "Dimensions": [{"Name": "Host", "Value": f"{job}/{host}"}],
                "Timestamp": end - timedelta(minutes=len(values) - i),
                "Value": value,
            }
            for i, value in enumerate(values)
        ],
    )


class DescribeOverride:
    """A SageMaker client whose DescribeTrainingJob answer has some fields replaced (status, times; None
    leaves the member out, as the service does for a running job's end time), checked against the
    operation's output shape."""

    def __init__(self, client: Any, **fields: Any) -> None:
        self.client = client
        self.fields = fields
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        """Everything else (``meta``, other calls) is the real client's."""
        return getattr(self.client, name)

    def describe_training_job(self, **kwargs: Any) -> dict[str, Any]:
        self.calls += 1
        answer = dict(self.client.describe_training_job(**kwargs))
        answer.update(self.fields)
        for key in [k for k, v in self.fields.items() if v is None]:  # None: the member is not sent at all
            del answer[key]
        check_answer("DescribeTrainingJob", answer)  # a replaced field of the service's own shape
        return answer


def window(minutes: int = 10) -> tuple[datetime, datetime]:
    """A training window ending now (UTC)."""
    end = datetime.now(UTC).replace(microsecond=0)
    return end - timedelta(minutes=minutes), end
