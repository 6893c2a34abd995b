"""Deferred jobs on one triggerer: N triggers in one event loop, ours against the Amazon provider's.

A stand-in SageMaker endpoint (its own process: JSON 1.1, DescribeTrainingJob and ListTrainingJobs
with the time filters, ``SortBy``/``SortOrder`` and paging) holds N running jobs. It refuses what
SageMaker refuses: every request is checked against botocore's service model by the offline
endpoint's validator (:mod:`airflow_hetero.local.api.constraints`: enums, bounds, lengths, patterns;
the client in front checked types and required members), and answers SageMaker's
``ValidationException``; the refusals are counted and printed. Each variant runs in a fresh
process, as a triggerer does: N triggers started in one asyncio loop the way Airflow 3's
``TriggerRunner.create_triggers`` starts them (yielding to the loop before and after building
each), then watched for a steady window. Measured per variant, in the same run:

* seconds from starting N - 1 triggers until every job had been checked once (the endpoint's
  first DescribeTrainingJob of the job);
* steady CPU per job per poll interval, in ms (process CPU over the window / N / intervals);
* memory per trigger: RSS growth / (N - 1) after a first trigger has loaded the libraries and
  built its client (what any triggerer pays once);
* event-loop lag: the worst lateness of a 50 ms ticker while the first trigger builds its client,
  while the other N - 1 start, and in the steady window; and the same not counting the time the
  interpreter spent in its garbage collector (taken from ``gc.callbacks``). A full collection
  stops every thread for a time that grows with everything the process holds: the benchmark
  counts them and measures one in the same process after importing only Airflow's trigger base
  (the floor no trigger can go below). ``--frozen-gc`` adds ours in a triggerer whose
  ``airflow_local_settings.py`` calls ``gc.freeze()`` (see docs/performance.md).

Baseline: ``SageMakerTrigger`` of the Amazon provider (one hook, one client and one waiter per
trigger). Ratios are ours / the provider's.

    python -m benchmarks.triggerer [--jobs 1000] [--interval 10] [--window 30] [--frozen-gc]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

CONN_ID = "bench_sagemaker"
#: variant -> column title; "ours-frozen" runs ours with ``gc.freeze()`` in airflow_local_settings
VARIANTS = {"provider": "provider", "ours": "airflow-hetero", "ours-frozen": "+ gc.freeze()"}
#: What a deployment puts in airflow_local_settings.py for the frozen variant (docs/performance.md).
FREEZE_SETTINGS = "import gc\n\ngc.freeze()  # the heap Airflow built at start-up: never scanned again\n"


# -- the stand-in endpoint -----------------------------------------------------------------------


def serve(port_file: str, jobs: int) -> None:
    """Run the stand-in SageMaker endpoint until killed; write its port to ``port_file``."""
    start = datetime.now(UTC).timestamp()
    table = {
        f"bench-{i}": {
            "TrainingJobName": f"bench-{i}",
            "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/bench-{i}",
            "TrainingJobStatus": "InProgress",
            "SecondaryStatus": "Training",
            "CreationTime": start,
            "LastModifiedTime": start,
            "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
            "ResourceConfig": {
                "InstanceGroups": [
                    {"InstanceGroupName": "data", "InstanceType": "ml.c5.xlarge", "InstanceCount": 2},
                    {"InstanceGroupName": "dnn", "InstanceType": "ml.p3.2xlarge", "InstanceCount": 1},
                ],
                "VolumeSizeInGB": 30,
            },
        }
        for i in range(jobs)
    }
    lock = threading.Lock()
    stats: dict[str, Any] = {"calls": {}, "first_seen": {}, "refused": {}}

    def seen(name: str) -> None:
        stats["first_seen"].setdefault(name, time.time())

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/x-amz-json-1.1")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            with lock:
                self._answer(200, stats)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            action = (self.headers.get("X-Amz-Target") or "").rsplit(".", 1)[-1]
            with lock:
                stats["calls"][action] = stats["calls"].get(action, 0) + 1
                refusal = refuse(action, body)
                if refusal is not None:
                    stats["refused"][action] = stats["refused"].get(action, 0) + 1
                    self._answer(400, refusal)
                elif action == "DescribeTrainingJob":
                    job = table.get(body.get("TrainingJobName", ""))
                    if job is None:
                        self._answer(400, {"__type": "ValidationException", "message": "Requested resource not found"})
                        return
                    seen(job["TrainingJobName"])
                    self._answer(200, job)
                else:
                    self._answer(200, list_jobs(table, body))

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 4096  # a thousand clients connecting at once must not be reset

    server = Server(("127.0.0.1", 0), Handler)
    with open(port_file, "w", encoding="utf-8") as f:
        f.write(str(server.server_address[1]))
    server.serve_forever()


def refuse(action: str, body: dict[str, Any]) -> dict[str, str] | None:
    """SageMaker's error answer to a request it would refuse (and to actions not served), else None."""
    from airflow_hetero.local.api.constraints import constraint_error, constraint_problems

    if action not in ("DescribeTrainingJob", "ListTrainingJobs"):
        return {"__type": "UnknownOperationException", "message": f"{action} is not served by the stand-in"}
    problems = constraint_problems(action, body)
    return {"__type": "ValidationException", "message": constraint_error(problems).message} if problems else None


#: ListTrainingJobs' SortBy values and the summary field each sorts by.
SORT_FIELDS = {"Name": "TrainingJobName", "CreationTime": "CreationTime", "Status": "TrainingJobStatus"}
SUMMARY_FIELDS = (
    "TrainingJobName",
    "TrainingJobArn",
    "CreationTime",
    "LastModifiedTime",
    "TrainingJobStatus",
    "SecondaryStatus",
)


def list_jobs(table: dict[str, dict[str, Any]], body: dict[str, Any]) -> dict[str, Any]:
    """ListTrainingJobs over ``table``: time filters, sort, MaxResults (default 10) and NextToken."""
    items = list(table.values())
    for param, key, sign in (
        ("CreationTimeAfter", "CreationTime", 1),
        ("CreationTimeBefore", "CreationTime", -1),
        ("LastModifiedTimeAfter", "LastModifiedTime", 1),
        ("LastModifiedTimeBefore", "LastModifiedTime", -1),
    ):
        if body.get(param) is not None:
            items = [j for j in items if (j[key] - float(body[param])) * sign > 0]
    items.sort(
        key=lambda j: (j[SORT_FIELDS[body.get("SortBy", "CreationTime")]], j["TrainingJobName"]),
        reverse=body.get("SortOrder", "Descending") == "Descending",
    )
    offset = int(body.get("NextToken") or 0)
    page = items[offset : offset + int(body.get("MaxResults") or 10)]
    answer: dict[str, Any] = {"TrainingJobSummaries": [{k: j[k] for k in SUMMARY_FIELDS} for j in page]}
    if offset + len(page) < len(items):
        answer["NextToken"] = str(offset + len(page))
    return answer


# -- one triggerer ---------------------------------------------------------------------------------


def trigger_factory(variant: str, interval: float) -> Callable[[int], Any]:
    """Trigger number ``i`` of ``variant``: ours, or the Amazon provider's SageMakerTrigger."""
    if variant.startswith("ours"):
        from airflow_hetero.triggers import HeteroTrainingTrigger

        return lambda i: HeteroTrainingTrigger(f"bench-{i}", aws_conn_id=CONN_ID, poll_interval=interval)
    from airflow.providers.amazon.aws.triggers.sagemaker import SageMakerTrigger

    return lambda i: SageMakerTrigger(
        f"bench-{i}", "training", waiter_delay=int(interval), waiter_max_attempts=10**6, aws_conn_id=CONN_ID
    )


@dataclass(frozen=True)
class Phases:
    """How long a run gives its triggers before the steady window: ``warm_up`` seconds for the first one (its
    libraries, connection and client; default ``max(interval, 3)``), then ``settle`` seconds for the other N - 1
    to start and be checked once (default ``max(2 x interval, 10)``). The defaults suit large N; a small run
    (the tests' few jobs) may give less."""

    warm_up: float | None = None
    settle: float | None = None

    def seconds(self, interval: float) -> tuple[float, float]:
        warm_up = max(interval, 3.0) if self.warm_up is None else self.warm_up
        settle = max(2 * interval, 10.0) if self.settle is None else self.settle
        return warm_up, settle

    def argv(self) -> list[str]:
        """These phases as the command-line options of :func:`add_phase_options`."""
        return [*(["--warm-up", str(self.warm_up)] if self.warm_up is not None else []),
                *(["--settle", str(self.settle)] if self.settle is not None else [])]  # fmt: skip


def add_phase_options(parser: argparse.ArgumentParser) -> None:
    """``--warm-up`` and ``--settle`` (:class:`Phases`)."""
    parser.add_argument(
        "--warm-up",
        type=float,
        help="seconds for the first trigger before the others start (default: max(interval, 3))",
    )
    parser.add_argument(
        "--settle",
        type=float,
        help="seconds for the other triggers to start and be checked once, before the steady window "
        "(default: max(2 x interval, 10))",
    )


def run_triggers(
    variant: str,
    jobs: int,
    interval: float,
    window: float,
    make: Callable[[int], Any] | None = None,
    calls: Callable[[], dict[str, int]] | None = None,
    phases: Phases | None = None,
) -> dict[str, float]:
    """In this process: start ``jobs`` triggers in one loop, watch them for ``window`` seconds.

    ``make`` builds trigger ``i`` (``variant``'s by default); ``calls`` reads the endpoint's request counts by
    action: those made in the steady window are returned as ``calls:<action>``. ``phases``: how long the first
    trigger and then the others get before the steady window (:class:`Phases`).
    """
    warm_up, settle = (phases or Phases()).seconds(interval)
    import asyncio
    import gc
    import resource

    import psutil
    from airflow.triggers.base import BaseTrigger  # noqa: F401  (what any triggerer has loaded)

    floor_ms = full_collection_ms()
    pauses: list[tuple[float, float, int]] = []  # (start, end, generation) of every collection, loop clock
    gc_start = [0.0]

    def on_gc(phase_name: str, info: dict[str, Any]) -> None:
        if phase_name == "start":
            gc_start[0] = time.monotonic()
        else:
            pauses.append((gc_start[0], time.monotonic(), info["generation"]))

    gc.callbacks.append(on_gc)

    make = make or trigger_factory(variant, interval)
    proc = psutil.Process()

    async def main() -> dict[str, float]:
        lag = {"first client": 0.0, "start": 0.0, "steady": 0.0}
        lag_not_gc = dict(lag)
        full_gc = {name: [0, 0.0] for name in lag}  # count, worst seconds
        phase = "first client"
        stop = asyncio.Event()

        async def ticker() -> None:
            loop = asyncio.get_running_loop()  # loop.time() is time.monotonic()
            seen = 0
            while not stop.is_set():
                expected = loop.time() + 0.05
                await asyncio.sleep(0.05)
                now = loop.time()
                # the part of the lateness spent in the garbage collector (any generation)
                in_gc = sum(max(0.0, min(end, now) - max(start, expected)) for start, end, _ in pauses[seen:])
                for start, end, generation in pauses[seen:]:
                    if generation == 2:
                        full_gc[phase][0] += 1
                        full_gc[phase][1] = max(full_gc[phase][1], end - start)
                seen = len(pauses)
                lag[phase] = max(lag[phase], now - expected)
                lag_not_gc[phase] = max(lag_not_gc[phase], now - expected - in_gc)

        async def consume(trigger: Any) -> None:
            async for _ in trigger.run():
                return

        tasks: list[asyncio.Task[None]] = []

        async def create_triggers(numbers: range) -> None:
            # as Airflow 3's TriggerRunner.create_triggers: it yields to the loop before loading
            # each trigger class and again before building the trigger, then starts its task
            for i in numbers:
                await asyncio.sleep(0)
                await asyncio.sleep(0)
                tasks.append(asyncio.ensure_future(consume(make(i))))

        tick = asyncio.ensure_future(ticker())
        # one trigger first: libraries, connection and the first client are paid once by any triggerer
        await create_triggers(range(1))
        await asyncio.sleep(warm_up)
        rss_warm = proc.memory_info().rss
        phase = "start"
        started = time.time()
        await create_triggers(range(1, jobs))
        await asyncio.sleep(settle)  # everything started and checked at least once
        phase = "steady"
        before = await asyncio.to_thread(calls) if calls else {}
        cpu0, t0 = time.process_time(), time.time()
        await asyncio.sleep(window)
        cpu1, t1 = time.process_time(), time.time()
        after = await asyncio.to_thread(calls) if calls else {}
        rss = proc.memory_info().rss
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, tick, return_exceptions=True)
        polls = (t1 - t0) / interval
        return {
            "started": started,
            "cpu_ms_per_poll": (cpu1 - cpu0) * 1000 / (jobs * polls),
            "mb_per_trigger": (rss - rss_warm) / 1e6 / max(jobs - 1, 1),
            "lag_first_ms": lag["first client"] * 1000,
            "lag_start_ms": lag["start"] * 1000,
            "lag_ms": lag["steady"] * 1000,
            "lag_not_gc_first_ms": lag_not_gc["first client"] * 1000,
            "lag_not_gc_start_ms": lag_not_gc["start"] * 1000,
            "lag_not_gc_ms": lag_not_gc["steady"] * 1000,
            "full_gc_start": full_gc["start"][0],
            "full_gc_steady": full_gc["steady"][0],
            "full_gc_worst_ms": max(worst for _, worst in full_gc.values()) * 1000,
            "full_gc_floor_ms": floor_ms,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "polls": polls,
            **{f"calls:{action}": n - before.get(action, 0) for action, n in after.items()},
        }

    return asyncio.run(main())


def full_collection_ms() -> float:
    """CPU of one full garbage collection of this process now (median of three)."""
    import gc

    gc.collect()
    times = []
    for _ in range(3):
        cpu = time.process_time()
        gc.collect()
        times.append(time.process_time() - cpu)
    return sorted(times)[1] * 1000


def connection_env(url: str) -> dict[str, str]:
    """This process's environment plus the benchmark's AWS connection to the endpoint at ``url``."""
    return {
        **os.environ,
        f"AIRFLOW_CONN_{CONN_ID.upper()}": json.dumps(
            {
                "conn_type": "aws",
                "login": "bench",
                "password": "bench",
                "extra": {"region_name": "us-east-1", "endpoint_url": url},
            }
        ),
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
    }


def measure(
    variant: str, port: int, jobs: int, interval: float, window: float, phases: Phases | None = None
) -> dict[str, float]:
    """Run one variant in a fresh process (a triggerer of its own)."""
    env = connection_env(f"http://127.0.0.1:{port}")
    code = [sys.executable, "-m", "benchmarks.triggerer", "--run", variant]
    code += ["--jobs", str(jobs), "--interval", str(interval), "--window", str(window)]
    code += (phases or Phases()).argv()
    with tempfile.TemporaryDirectory() as settings_dir:
        if variant.endswith("-frozen"):
            Path(settings_dir, "airflow_local_settings.py").write_text(FREEZE_SETTINGS, encoding="utf-8")
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [settings_dir, env.get("PYTHONPATH")]))
        out = subprocess.run(code, env=env, check=True, capture_output=True, text=True).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def endpoint_stats(port: int) -> dict[str, Any]:
    from urllib.request import urlopen

    with urlopen(f"http://127.0.0.1:{port}/stats", timeout=10) as answer:
        stats: dict[str, Any] = json.loads(answer.read())
        return stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--interval", type=float, default=10.0)
    parser.add_argument("--window", type=float, default=30.0)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--run", help=argparse.SUPPRESS)
    parser.add_argument("--only", choices=VARIANTS, help="run one variant (no ratios)")
    parser.add_argument(
        "--frozen-gc",
        action="store_true",
        help="also run ours in a triggerer whose airflow_local_settings calls gc.freeze()",
    )
    add_phase_options(parser)
    args = parser.parse_args(argv)
    phases = Phases(args.warm_up, args.settle)
    if args.serve:
        serve(args.serve, args.jobs)
        return 0
    if args.run:
        result = run_triggers(args.run, args.jobs, args.interval, args.window, phases=phases)
        print(json.dumps(result))
        return 0

    results: dict[str, dict[str, float]] = {}
    variants = [args.only] if args.only else ["provider", "ours"] + (["ours-frozen"] if args.frozen_gc else [])
    for variant in variants:
        with tempfile.TemporaryDirectory() as tmp:
            port_file = os.path.join(tmp, "port")
            server = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.triggerer", "--serve", port_file, "--jobs", str(args.jobs)]
            )
            try:
                port_path = Path(port_file)
                while not port_path.exists() or not port_path.read_text(encoding="utf-8"):
                    time.sleep(0.05)
                port = int(port_path.read_text(encoding="utf-8"))
                result = measure(variant, port, args.jobs, args.interval, args.window, phases)
                stats = endpoint_stats(port)
            finally:
                server.kill()
                server.wait()
        seen = stats["first_seen"]
        result["all_checked_s"] = (max(seen.values()) - result["started"]) if len(seen) == args.jobs else float("nan")
        result["checked"] = len(seen)  # jobs described at least once in the whole run
        result["describe"] = stats["calls"].get("DescribeTrainingJob", 0)
        result["list"] = stats["calls"].get("ListTrainingJobs", 0)
        result["refused"] = sum(stats["refused"].values())
        results[variant] = result

    print(f"Triggerer: {args.jobs} deferred jobs in one event loop, poll interval {args.interval:g}s")
    rows = [
        ("every job checked once after (s)", "all_checked_s", "{:.1f}"),
        ("jobs checked at least once", "checked", "{:.0f}"),
        ("steady CPU per job per poll (ms)", "cpu_ms_per_poll", "{:.3f}"),
        ("memory per trigger (MB)", "mb_per_trigger", "{:.3f}"),
        ("worst loop lag, first client (ms)", "lag_first_ms", "{:.0f}"),
        ("worst loop lag, N-1 starting (ms)", "lag_start_ms", "{:.0f}"),
        ("worst loop lag, steady (ms)", "lag_ms", "{:.0f}"),
        ("  not counting GC pauses, first client", "lag_not_gc_first_ms", "{:.0f}"),
        ("  not counting GC pauses, N-1 starting", "lag_not_gc_start_ms", "{:.0f}"),
        ("  not counting GC pauses, steady", "lag_not_gc_ms", "{:.0f}"),
        ("full collections while starting", "full_gc_start", "{:.0f}"),
        ("full collections in the steady window", "full_gc_steady", "{:.0f}"),
        ("worst full collection (ms)", "full_gc_worst_ms", "{:.0f}"),
        ("full collection, Airflow alone (ms)", "full_gc_floor_ms", "{:.0f}"),
        ("peak RSS (MB)", "peak_rss_mb", "{:.0f}"),
        ("DescribeTrainingJob calls", "describe", "{:.0f}"),
        ("ListTrainingJobs calls", "list", "{:.0f}"),
        ("requests refused (invalid for SageMaker)", "refused", "{:.0f}"),
    ]
    compared = "ours" in variants and "provider" in variants
    print(f"{'':40}" + "".join(f"{VARIANTS[v]:>16}" for v in variants) + ("  x provider" if compared else ""))
    for label, key, fmt in rows:
        line = f"{label:40}" + "".join(f"{fmt.format(results[v][key]):>16}" for v in variants)
        if compared:
            theirs = results["provider"][key]
            line += f"{results['ours'][key] / theirs:>12.3f}" if theirs else f"{'-':>12}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
