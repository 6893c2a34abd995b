"""The log-summary benchmark's job: 8 hosts in 3 instance groups and their log streams in a moto server.

One group's MPI workers print no start-up block, one host prints only the runtime marker; lines
are steps with a metric line every 50, some warnings and a few errors. :func:`minimum_calls` is
the fewest API calls the page limits allow for reading them.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import time

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
REGION = "us-east-1"
#: Three groups, eight hosts; host numbers deliberately do not follow group order.
LAYOUT: dict[str, tuple[str, list[str]]] = {
    "data_group": ("ml.c5.18xlarge", ["algo-2", "algo-5", "algo-7"]),
    "dnn_group": ("ml.p4d.24xlarge", ["algo-1", "algo-3", "algo-4", "algo-8"]),
    "eval_group": ("ml.g5.xlarge", ["algo-6"]),
}
METRICS = [{"Name": "train:loss", "Regex": r"loss=([0-9.]+)"}, {"Name": "val:acc", "Regex": r"acc=([0-9.]+)"}]
EVENTS_PER_PAGE = 10_000
PAGE_BYTES = 1_048_576
EVENT_OVERHEAD = 26
PUT_BATCH = 8_000


def _startup_block(host: str, group: str) -> list[str]:
    """The toolkit's start-up lines that matter for the mapping."""
    config = {
        "current_group_name": group,
        "current_host": host,
        "current_instance_type": LAYOUT[group][0],
        "hosts": sorted(h for _, hosts in LAYOUT.values() for h in hosts),
        "instance_groups": [
            {"hosts": hosts, "instance_group_name": name, "instance_type": itype}
            for name, (itype, hosts) in LAYOUT.items()
        ],
    }
    return [
        "Invoking user script",
        f"SM_CURRENT_HOST={host}",
        f"SM_CURRENT_INSTANCE_GROUP={group}",
        "SM_RESOURCE_CONFIG=" + json.dumps(config, separators=(",", ":")),
    ]


def _lines(host: str, group: str, count: int, rng: random.Random) -> list[str]:
    """``count`` log lines for one host: start-up block (not on MPI workers), steps, some noise."""
    hosts = LAYOUT[group][1]
    if group == "dnn_group" and host != hosts[0]:
        head: list[str] = []  # MPI workers print no start-up block
    elif group == "eval_group":
        head = [f"[airflow-hetero] host={host} group={group} instance_type={LAYOUT[group][0]}"]
    else:
        head = _startup_block(host, group)
    out = head[:count]
    for i in range(count - len(out)):
        roll = rng.random()
        if roll < 0.00005:
            out.append(f"ERROR worker {host} step {i}: batch failed, retrying")
        elif roll < 0.001:
            out.append(f"WARNING {host} step {i}: input pipeline slow")
        elif i % 50 == 0:
            out.append(f"step {i} loss={1 / (1 + i / 1000):.4f} acc={i / (i + 5000):.4f}")
        else:
            out.append(f"{host} step {i} processed batch of 256 in {rng.random() * 90:.3f} ms")
    return out


def populate(endpoint: str, job: str, total_events: int, seed: int = 0) -> dict[str, tuple[int, int]]:
    """Create the job and its streams; return stream -> (events, bytes)."""
    import boto3

    kwargs = {"endpoint_url": endpoint, "region_name": REGION}
    sagemaker = boto3.client("sagemaker", **kwargs)
    logs = boto3.client("logs", **kwargs)
    sagemaker.create_training_job(
        TrainingJobName=job,
        RoleArn="arn:aws:iam::123456789012:role/SageMakerRole",
        AlgorithmSpecification={"TrainingImage": "img", "TrainingInputMode": "File", "MetricDefinitions": METRICS},
        OutputDataConfig={"S3OutputPath": "s3://bucket/out"},
        ResourceConfig={
            "InstanceGroups": [
                {"InstanceGroupName": name, "InstanceType": itype, "InstanceCount": len(hosts)}
                for name, (itype, hosts) in LAYOUT.items()
            ],
            "VolumeSizeInGB": 30,
        },
        StoppingCondition={"MaxRuntimeInSeconds": 86400},
    )
    with contextlib.suppress(logs.exceptions.ResourceAlreadyExistsException):
        logs.create_log_group(logGroupName=LOG_GROUP)  # a moto server in-process shares its state
    rng = random.Random(seed)
    hosts = [(h, g) for g, (_, hs) in LAYOUT.items() for h in hs]
    per_host = [total_events // len(hosts) + (1 if i < total_events % len(hosts) else 0) for i in range(len(hosts))]
    start = int(time.time() * 1000) - 3_600_000
    sizes: dict[str, tuple[int, int]] = {}
    for (host, group), count in zip(hosts, per_host, strict=True):
        stream = f"{job}/{host}-1767225600"
        logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
        lines = _lines(host, group, count, rng)
        size = 0
        for offset in range(0, len(lines), PUT_BATCH):
            batch = [
                {"timestamp": start + (offset + i) // 40, "message": line}
                for i, line in enumerate(lines[offset : offset + PUT_BATCH])
            ]
            size += sum(len(e["message"].encode()) for e in batch)
            logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=stream, logEvents=batch)
        sizes[stream] = (len(lines), size)
    return sizes


def minimum_calls(sizes: dict[str, tuple[int, int]]) -> int:
    """DescribeLogStreams pages + per stream: pages by the 10,000-event / 1 MB limits, plus the end call."""
    pages = 0
    for events, size in sizes.values():
        pages += max(math.ceil(events / EVENTS_PER_PAGE), math.ceil((size + EVENT_OVERHEAD * events) / PAGE_BYTES)) + 1
    return math.ceil(len(sizes) / 50) + pages
