"""Benchmark: summarising a heterogeneous job's logs vs the Amazon provider's ``multi_stream_iter``.

One run starts a moto server on 127.0.0.1, fills it with a job of 8 hosts in 3 instance groups and
``--events`` log events (default 1,000,000), then reads the same streams with

* ``airflow-hetero``: :func:`airflow_hetero.logs.summarize_training_job` (threads across
  streams, bounded accumulation);
* ``provider``: ``SageMakerHook.multi_stream_iter`` from apache-airflow-providers-amazon, feeding
  the same per-stream accumulators (so only the reading differs);
* ``raw drain``: GetLogEvents page after page, one thread, nothing done with the events (the
  server's own floor);

each in a fresh subprocess, ``--repeats`` times (medians reported). Per reader: wall time, peak RSS
and RSS growth over the process's size after imports, and API calls (counted by botocore event
hooks). The reference is the minimum number of calls the page limits allow: one DescribeLogStreams
per 50 streams, and per stream one GetLogEvents per 10,000 events or 1 MB plus the call that sees
the token repeat (the only way to know a stream ended).

Run: ``python -m benchmarks.log_summary`` (``--events 100000`` for a quick run).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

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
READERS = ("airflow-hetero", "provider", "raw drain")


def _env(endpoint: str) -> dict[str, str]:
    """Environment for reader subprocesses: fake credentials, the endpoint, a throwaway Airflow home."""
    home = tempfile.mkdtemp(prefix="bench-airflow-")
    conn = {"conn_type": "aws", "extra": {"endpoint_url": endpoint, "region_name": REGION}}
    return {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AIRFLOW_HOME": home,
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_BENCH_AWS": json.dumps(conn),
    }


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


# -- reader subprocesses -----------------------------------------------------------------------------


def _rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_rss_mb() -> float:
    """VmHWM: this process's peak RSS (ru_maxrss would include the pre-exec parent's pages)."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _count_calls(client: Any, counts: dict[str, int]) -> None:
    lock = threading.Lock()

    def count(event_name: str, **_: Any) -> None:
        action = event_name.rsplit(".", maxsplit=1)[-1]
        with lock:  # the airflow-hetero reader calls from several threads
            counts[action] = counts.get(action, 0) + 1

    client.meta.events.register("before-call.*.*", count)


def run_reader(name: str, endpoint: str, job: str, workers: int) -> dict[str, Any]:
    """Read the job's logs one way; return wall time, calls, memory, what was found."""
    import boto3

    from airflow_hetero.logs import summarize_training_job
    from airflow_hetero.logs.cloudwatch import list_job_streams, read_stream
    from airflow_hetero.logs.line_rules import LineRules
    from airflow_hetero.logs.streams import StreamLog, host_from_stream

    counts: dict[str, int] = {}
    kwargs = {"endpoint_url": endpoint, "region_name": REGION}
    result: dict[str, Any] = {}
    if name == "provider":
        from airflow.providers.amazon.aws.hooks.sagemaker import SageMakerHook

        hook = SageMakerHook(aws_conn_id="bench_aws")
        logs_client = hook.logs_hook.conn
        _count_calls(logs_client, counts)
        base = _rss_mb()
        started, cpu = time.perf_counter(), time.process_time()
        streams = list_job_streams(logs_client, job)
        rules = LineRules.build(metric_definitions=METRICS)
        accumulators = [StreamLog(s, host_from_stream(s, job), rules) for s in streams]
        for index, event in hook.multi_stream_iter(LOG_GROUP, streams):
            accumulators[index].add(event["timestamp"], event["message"])
        result["events"] = sum(a.events for a in accumulators)
    elif name == "airflow-hetero":
        clients = {
            "logs_client": boto3.client("logs", **kwargs),
            "sagemaker_client": boto3.client("sagemaker", **kwargs),
            "cloudwatch_client": boto3.client("cloudwatch", **kwargs),
        }
        _count_calls(clients["logs_client"], counts)
        base = _rss_mb()
        started, cpu = time.perf_counter(), time.process_time()
        summary = summarize_training_job(job, include_metrics=False, max_workers=workers, **clients)
        result["events"] = sum(g["events"] for g in summary["groups"].values())
        result["groups"] = {n: g["hosts"] for n, g in summary["groups"].items()}
        result["unmapped"] = summary["unmapped_hosts"]
        result["summary_bytes"] = len(json.dumps(summary))
        result["summary"] = summary
    else:
        logs_client = boto3.client("logs", **kwargs)
        _count_calls(logs_client, counts)
        base = _rss_mb()
        started, cpu = time.perf_counter(), time.process_time()
        total = 0

        def sink(events: list[dict[str, Any]]) -> None:
            nonlocal total
            total += len(events)

        for stream in list_job_streams(logs_client, job):
            read_stream(logs_client, stream, sink)
        result["events"] = total
    result["seconds"] = time.perf_counter() - started
    result["cpu_seconds"] = time.process_time() - cpu
    result["calls"] = sum(counts.values())
    result["calls_by_action"] = counts
    result["rss_base_mb"] = base
    result["rss_peak_mb"] = _peak_rss_mb()
    return result


def _spawn(name: str, endpoint: str, job: str, workers: int) -> dict[str, Any]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.log_summary",
            "--reader",
            name,
            "--endpoint",
            endpoint,
            "--job",
            job,
            "--workers",
            str(workers),
        ],
        capture_output=True,
        text=True,
        env=_env(endpoint),
        cwd=Path(__file__).resolve().parents[1],
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"reader {name} failed:\n{proc.stderr[-4000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True)))
        for row in rows
    )


def benchmark(
    events: int = 1_000_000,
    repeats: int = 3,
    workers: int = 4,
    example: str | None = None,
    readers: tuple[str, ...] = READERS,
) -> dict[str, Any]:
    """Populate a moto server, run every reader ``repeats`` times, print and return the medians."""
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)

    for key, value in _env("").items():
        if key.startswith("AWS_"):
            os.environ[key] = value
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        t0 = time.perf_counter()
        job = f"bench-hetero-{os.getpid()}-{int(time.time())}"  # unique: the server may hold other jobs
        sizes = populate(endpoint, job, events)
        print(
            f"populated {sum(n for n, _ in sizes.values()):,} events in {len(sizes)} streams "
            f"({sum(b for _, b in sizes.values()) / 2**20:.1f} MB) in {time.perf_counter() - t0:.1f} s"
        )
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in readers}
        for _ in range(repeats):
            for name in readers:
                runs[name].append(_spawn(name, endpoint, job, workers))
    finally:
        server.stop()
    floor = minimum_calls(sizes)
    ours = statistics.median(r["seconds"] for r in runs["airflow-hetero"])
    rows = [
        [
            "reader",
            "wall s (median)",
            "wall s (range)",
            "x ours",
            "CPU s (median)",
            "x raw drain CPU",
            "peak RSS MB",
            "RSS growth MB",
            "API calls",
            "x minimum",
            "events",
        ]
    ]
    medians: dict[str, Any] = {"events": events, "repeats": repeats, "workers": workers, "minimum_calls": floor}
    rows.append(["minimum (page limits)", "-", "-", "-", "-", "-", "-", "-", str(floor), "1.00", f"{events:,}"])
    drain_cpu = statistics.median(r["cpu_seconds"] for r in runs["raw drain"]) if "raw drain" in runs else None
    for name in readers:
        items = runs[name]
        seconds = statistics.median(r["seconds"] for r in items)
        peak = statistics.median(r["rss_peak_mb"] for r in items)
        growth = statistics.median(r["rss_peak_mb"] - r["rss_base_mb"] for r in items)
        calls = statistics.median(r["calls"] for r in items)
        cpu = statistics.median(r["cpu_seconds"] for r in items)
        medians[name] = {
            "seconds": seconds,
            "cpu_seconds": cpu,
            "seconds_each": [r["seconds"] for r in items],
            "rss_peak_mb": peak,
            "rss_growth_mb": growth,
            "calls": calls,
            "calls_by_action": items[0]["calls_by_action"],
            "events": items[0]["events"],
        }
        rows.append(
            [
                name,
                f"{seconds:.2f}",
                f"{min(r['seconds'] for r in items):.2f}-{max(r['seconds'] for r in items):.2f}",
                f"{seconds / ours:.2f}",
                f"{cpu:.2f}",
                f"{cpu / drain_cpu:.2f}" if drain_cpu else "-",
                f"{peak:.0f}",
                f"{growth:.0f}",
                f"{calls:.0f}",
                f"{calls / floor:.2f}",
                f"{items[0]['events']:,}",
            ]
        )
    print(_table(rows))
    first = runs["airflow-hetero"][0]
    print(
        f"airflow-hetero groups: {first['groups']}, unmapped: {first['unmapped']}, "
        f"summary {first['summary_bytes']:,} bytes"
    )
    if example:
        Path(example).write_text(json.dumps(first["summary"], indent=2) + "\n")
    return medians


def main(argv: list[str] | None = None) -> int:
    """Command line: the benchmark, or (internally) one reader run."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.log_summary", description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="log events in total (default 1,000,000)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per reader; medians are reported")
    parser.add_argument("--workers", type=int, default=4, help="streams read at once by airflow-hetero")
    parser.add_argument("--example", help="write the first airflow-hetero summary (JSON) to this file")
    parser.add_argument("--readers", default=",".join(READERS), help=f"comma-separated subset of {', '.join(READERS)}")
    parser.add_argument("--reader", choices=READERS, help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--job", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.reader:
        result = run_reader(args.reader, args.endpoint, args.job, args.workers)
        print(json.dumps(result, default=str))
        return 0
    readers = tuple(name.strip() for name in args.readers.split(",") if name.strip())
    unknown = sorted(set(readers) - set(READERS))
    if unknown or "airflow-hetero" not in readers:
        parser.error(f"--readers must include airflow-hetero and name only {', '.join(READERS)}")
    benchmark(args.events, args.repeats, args.workers, args.example, readers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
