"""Benchmark: summarising a heterogeneous job's logs, against a bare page drain and the Amazon provider.

One run starts a moto server on 127.0.0.1, fills it with a job of 8 hosts in 3 instance groups and
``--events`` log events (default 1,000,000; :mod:`benchmarks.log_data`), then reads the same
streams with

* ``airflow-hetero``: :func:`airflow_hetero.logs.summarize_training_job` (threads across
  streams, bounded accumulation), once per ``--workers`` value (default: its default
  ``max_workers`` and 1);
* ``provider``: ``SageMakerHook.multi_stream_iter`` from apache-airflow-providers-amazon, feeding
  the same per-stream accumulators (so only the reading differs);
* ``raw drain``: GetLogEvents page after page, one thread, nothing done with the events (the
  server's own floor, and the baseline of the CPU ratios);
* ``threaded drain``: the same with as many threads as the default ``max_workers`` (extra
  information: what the threads alone cost);

each in a fresh subprocess, ``--repeats`` times, interleaved (medians reported). Per reader: wall
time, CPU time (process time of the reader, from after imports and client creation), peak RSS
and RSS growth over the process's size after imports, and API calls (counted by botocore event
hooks). The reference for calls is the minimum the page limits allow: one DescribeLogStreams per
50 streams, and per stream one GetLogEvents per 10,000 events or 1 MB plus the call that sees the
token repeat (the only way to know a stream ended). The last lines print the headline: CPU of
``summarize_training_job`` over the bare one-thread drain's, per ``max_workers``.

Run: ``python -m benchmarks.log_summary`` (``--events 100000`` for a quick run).
"""

from __future__ import annotations

import argparse
import inspect
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.log_data import LAYOUT, LOG_GROUP, METRICS, REGION, _lines, minimum_calls, populate

__all__ = ["LAYOUT", "READERS", "_lines", "benchmark", "main", "minimum_calls", "populate", "run_reader"]

READERS = ("airflow-hetero", "provider", "raw drain", "threaded drain")
#: The CPU goal of issue 11: the summary costs at most this much CPU over the bare one-thread drain.
CPU_GOAL = 1.3


def default_workers() -> int:
    """``summarize_training_job``'s default ``max_workers`` (the configuration users get)."""
    from airflow_hetero.logs.summarize import summarize_training_job

    return int(inspect.signature(summarize_training_job).parameters["max_workers"].default)


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
    """Read the job's logs one way; return wall time, CPU time, calls, memory, what was found."""
    from concurrent.futures import ThreadPoolExecutor

    import boto3

    from airflow_hetero.logs import summarize_training_job
    from airflow_hetero.logs.cloudwatch import list_job_streams, read_stream
    from airflow_hetero.logs.patterns import LineRules
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
    else:  # the drains: every page fetched and parsed by botocore, nothing done with the events
        logs_client = boto3.client("logs", **kwargs)
        _count_calls(logs_client, counts)
        base = _rss_mb()
        started, cpu = time.perf_counter(), time.process_time()
        total = 0
        lock = threading.Lock()

        def sink(events: list[dict[str, Any]]) -> None:
            nonlocal total
            with lock:
                total += len(events)

        streams = list_job_streams(logs_client, job)
        if name == "raw drain":
            for stream in streams:
                read_stream(logs_client, stream, sink)
        else:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                list(pool.map(lambda stream: read_stream(logs_client, stream, sink), streams))
        result["events"] = total
    result["seconds"] = time.perf_counter() - started
    result["cpu_seconds"] = time.process_time() - cpu
    result["calls"] = sum(counts.values())
    result["calls_by_action"] = counts
    result["rss_base_mb"] = base
    result["rss_peak_mb"] = _peak_rss_mb()
    return result


def _spawn(name: str, endpoint: str, job: str, workers: int) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.log_summary", "--reader", name, "--endpoint", endpoint]
    proc = subprocess.run(
        [*command, "--job", job, "--workers", str(workers)],
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


def _variants(readers: tuple[str, ...], workers: list[int]) -> list[tuple[str, str, int]]:
    """(label, reader, threads) of every run: airflow-hetero once per ``workers`` value."""
    out: list[tuple[str, str, int]] = []
    for name in readers:
        if name == "airflow-hetero":
            out.extend((name if i == 0 else f"{name} max_workers={w}", name, w) for i, w in enumerate(workers))
        elif name == "threaded drain":
            out.append((f"{name} ({workers[0]} threads)", name, workers[0]))
        else:
            out.append((name, name, 1))
    return out


def benchmark(
    events: int = 1_000_000,
    repeats: int = 3,
    workers: int | list[int] | None = None,
    example: str | None = None,
    readers: tuple[str, ...] = READERS,
) -> dict[str, Any]:
    """Populate a moto server, run every reader ``repeats`` times, print and return the medians.

    ``workers``: airflow-hetero's ``max_workers``, one value or several (each its own row; the
    first is also the threaded drain's thread count); None: the default and 1.
    """
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    default = default_workers()
    counts = [default, 1] if workers is None else [workers] if isinstance(workers, int) else list(workers)
    variants = _variants(readers, list(dict.fromkeys(counts)))
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
        runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in variants}
        for _ in range(repeats):  # interleaved: each repeat sees the machine in about the same state
            for label, name, threads in variants:
                runs[label].append(_spawn(name, endpoint, job, threads))
    finally:
        server.stop()
    floor = minimum_calls(sizes)
    ours = statistics.median(r["seconds"] for r in runs["airflow-hetero"])
    header = ["reader", "wall s (median)", "wall s (range)", "x ours", "CPU s (median)", "x raw drain CPU"]
    rows = [[*header, "peak RSS MB", "RSS growth MB", "API calls", "x minimum", "events"]]
    medians: dict[str, Any] = {"events": events, "repeats": repeats, "workers": counts, "minimum_calls": floor}
    rows.append(["minimum (page limits)", "-", "-", "-", "-", "-", "-", "-", str(floor), "1.00", f"{events:,}"])
    drain_cpu = statistics.median(r["cpu_seconds"] for r in runs["raw drain"]) if "raw drain" in runs else None
    for label, _, threads in variants:
        items = runs[label]
        seconds = statistics.median(r["seconds"] for r in items)
        cpu = statistics.median(r["cpu_seconds"] for r in items)
        medians[label] = {
            "threads": threads,
            "seconds": seconds,
            "cpu_seconds": cpu,
            "cpu_each": [r["cpu_seconds"] for r in items],
            "cpu_ratio": cpu / drain_cpu if drain_cpu else None,
            "seconds_each": [r["seconds"] for r in items],
            "rss_peak_mb": statistics.median(r["rss_peak_mb"] for r in items),
            "rss_growth_mb": statistics.median(r["rss_peak_mb"] - r["rss_base_mb"] for r in items),
            "calls": statistics.median(r["calls"] for r in items),
            "calls_by_action": items[0]["calls_by_action"],
            "events": items[0]["events"],
        }
        m = medians[label]
        shown = f"{label} max_workers={threads}" if label == "airflow-hetero" else label
        wall_range = f"{min(m['seconds_each']):.2f}-{max(m['seconds_each']):.2f}"
        cpu_ratio = f"{m['cpu_ratio']:.2f}" if drain_cpu else "-"
        memory = [f"{m['rss_peak_mb']:.0f}", f"{m['rss_growth_mb']:.0f}"]
        calls = [f"{m['calls']:.0f}", f"{m['calls'] / floor:.2f}"]
        times = [f"{seconds:.2f}", wall_range, f"{seconds / ours:.2f}", f"{cpu:.2f}", cpu_ratio]
        rows.append([shown, *times, *memory, *calls, f"{m['events']:,}"])
    print(_table(rows))
    first = runs["airflow-hetero"][0]
    print(
        f"airflow-hetero groups: {first['groups']}, unmapped: {first['unmapped']}, "
        f"summary {first['summary_bytes']:,} bytes"
    )
    if drain_cpu:
        _headline(medians, variants, default, repeats)
    if example:
        Path(example).write_text(json.dumps(first["summary"], indent=2) + "\n")
    return medians


def _headline(medians: dict[str, Any], variants: list[tuple[str, str, int]], default: int, repeats: int) -> None:
    """CPU of summarize_training_job over the bare one-thread drain's, per max_workers."""
    print(f"CPU of summarize_training_job / CPU of the bare one-thread page drain (medians of {repeats}):")
    for label, name, threads in variants:
        if name == "airflow-hetero":
            ratio = medians[label]["cpu_ratio"]
            verdict = "meets" if ratio <= CPU_GOAL else "MISSES"
            note = " (the default)" if threads == default else ""
            print(f"  max_workers={threads}{note}: {ratio:.2f}x  [{verdict} the goal of at most {CPU_GOAL}x]")
    for label, name, threads in variants:
        if name == "threaded drain":
            drained = medians[label]["cpu_seconds"]
            for other, kind, count in variants:
                if kind == "airflow-hetero" and count == threads:
                    ratio = medians[other]["cpu_seconds"] / drained
                    print(f"  (extra: max_workers={threads} / a drain with {threads} threads: {ratio:.2f}x)")


def main(argv: list[str] | None = None) -> int:
    """Command line: the benchmark, or (internally) one reader run."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.log_summary", description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="log events in total (default 1,000,000)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per reader; medians are reported")
    parser.add_argument(
        "--workers",
        help="comma-separated max_workers values for airflow-hetero (default: its default, then 1)",
    )
    parser.add_argument("--example", help="write the first airflow-hetero summary (JSON) to this file")
    parser.add_argument("--readers", default=",".join(READERS), help=f"comma-separated subset of {', '.join(READERS)}")
    parser.add_argument("--reader", choices=READERS, help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--job", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.reader:
        result = run_reader(args.reader, args.endpoint, args.job, int(args.workers or default_workers()))
        print(json.dumps(result, default=str))
        return 0
    readers = tuple(name.strip() for name in args.readers.split(",") if name.strip())
    unknown = sorted(set(readers) - set(READERS))
    if unknown or "airflow-hetero" not in readers:
        parser.error(f"--readers must include airflow-hetero and name only {', '.join(READERS)}")
    workers = [int(w) for w in args.workers.split(",")] if args.workers else None
    if workers is not None and (not workers or min(workers) < 1):
        parser.error("--workers takes positive integers")
    benchmark(args.events, args.repeats, workers, args.example, readers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
