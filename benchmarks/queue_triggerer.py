"""Queued jobs on one triggerer: N service jobs waiting in an AWS Batch queue against N training jobs (direct mode).

Two variants in the same run, each triggerer a fresh process whose N triggers start as Airflow 3's
``TriggerRunner.create_triggers`` starts them (:func:`benchmarks.triggerer.run_triggers`):

* **queue**: N :class:`~airflow_hetero.triggers.queue.HeteroServiceJobTrigger` on N RUNNABLE service jobs of one
  queue of the offline endpoint (:class:`airflow_hetero.local.LocalEndpoint`, in its own process: its Batch API
  checks every request and answer against botocore's ``batch`` model). The queue's one instance is held by a
  first service job whose training job sleeps, so the N stay RUNNABLE for the whole run;
* **direct**: N :class:`~airflow_hetero.triggers.HeteroTrainingTrigger` on N InProgress training jobs of
  :mod:`benchmarks.triggerer`'s stand-in SageMaker endpoint.

Measured per variant over the steady window (after every job was checked once): the API calls by action, counted
at the endpoint, per poll interval; steady CPU per job per poll interval (ms); memory per trigger; worst
event-loop lag. The queue watcher lists each queue once per interval (``ListServiceJobs``, 100 summaries a
page: ceil((N + 1) / 100) pages) and reads its front once (``GetJobQueueSnapshot``) while a watched job is
RUNNABLE; a DescribeServiceJob only for a job the listing did not show. Ratios are queue / direct.

    python -m benchmarks.queue_triggerer [--jobs 500] [--interval 10] [--window 30]
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from benchmarks import triggerer

QUEUE = "bench-q"
BUCKET = "bench-queue"
VARIANTS = {"queue": "queue mode", "direct": "direct mode"}
QUEUE_ACTIONS = ("ListServiceJobs", "GetJobQueueSnapshot", "DescribeServiceJob")
DIRECT_ACTIONS = ("ListTrainingJobs", "DescribeTrainingJob")
#: What the queue's one instance runs for the whole benchmark (ended when the endpoint stops).
HOLDER_SCRIPT = "import time\ntime.sleep(3600)\n"


# -- the offline queue ---------------------------------------------------------------------------------


def payload(name: str, source: str) -> dict[str, Any]:
    """The CreateTrainingJob request of a one-instance script-mode job ``name`` running ``source``."""
    hps = {"sagemaker_program": '"train.py"', "sagemaker_submit_directory": json.dumps(source)}
    return {
        "TrainingJobName": name,
        "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
        "AlgorithmSpecification": {
            "TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.1-cpu-py310",
            "TrainingInputMode": "File",
        },
        "HyperParameters": hps,
        "OutputDataConfig": {"S3OutputPath": f"s3://{BUCKET}/output"},
        "ResourceConfig": {"InstanceType": "ml.c5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 7200},
    }


def source_tarball(script: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        data = script.encode()
        info = tarfile.TarInfo("train.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def until(check: Any, what: str, timeout: float = 300.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := check()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the offline queue: timed out waiting for {what}")
        time.sleep(0.2)
    return value


def fill_queue(endpoint: Any, jobs: int) -> list[dict[str, str]]:
    """A holder job RUNNING on the queue's one instance, then ``jobs`` service jobs RUNNABLE behind it."""
    s3, batch = endpoint.client("s3"), endpoint.client("batch")
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="source.tar.gz", Body=source_tarball(HOLDER_SCRIPT))
    source = f"s3://{BUCKET}/source.tar.gz"

    def submit(name: str) -> dict[str, str]:
        made = batch.submit_service_job(
            jobName=name,
            jobQueue=QUEUE,
            serviceJobType="SAGEMAKER_TRAINING",
            serviceRequestPayload=json.dumps(payload(name, source)),
        )
        return {"id": made["jobId"], "name": name}

    holder = submit("bench-holder")["id"]
    until(lambda: batch.describe_service_job(jobId=holder)["status"] == "RUNNING", "the holder job to run")
    queued = [submit(f"bench-{i}") for i in range(jobs)]

    def all_runnable() -> bool:
        pages = batch.get_paginator("list_service_jobs").paginate(jobQueue=QUEUE, jobStatus="RUNNABLE")
        return sum(len(page["jobSummaryList"]) for page in pages) == jobs

    until(all_runnable, f"{jobs} jobs to be RUNNABLE")
    if batch.describe_service_job(jobId=holder)["status"] != "RUNNING":
        raise RuntimeError("the holder job ended before the benchmark started")
    return queued


def serve_queue(info_file: str, jobs: int) -> None:
    """Run the offline endpoint with the filled queue until killed; write its URL, the job ids and the URL of
    its request counts (``LocalEndpoint.batch_calls``) to ``info_file``."""
    from airflow_hetero.local import BatchOptions, LocalEndpoint

    with LocalEndpoint(batch_queues={QUEUE: 1}, batch=BatchOptions(poll_interval=1.0)) as endpoint:
        queued = fill_queue(endpoint, jobs)

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                data = json.dumps(endpoint.batch_calls()).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        stats = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=stats.serve_forever, daemon=True).start()
        info = {"url": endpoint.url, "stats": f"http://127.0.0.1:{stats.server_address[1]}/", "jobs": queued}
        Path(info_file + ".tmp").write_text(json.dumps(info), encoding="utf-8")
        os.replace(info_file + ".tmp", info_file)
        threading.Event().wait()  # until killed


def fetch_json(url: str) -> Any:
    from urllib.request import urlopen

    with urlopen(url, timeout=30) as answer:
        return json.loads(answer.read())


# -- one triggerer -------------------------------------------------------------------------------------


def run_variant(
    variant: str, info_file: str, jobs: int, interval: float, window: float, phases: triggerer.Phases | None = None
) -> dict[str, float]:
    """In this process: ``jobs`` triggers of ``variant`` on the endpoint described by ``info_file``."""
    info = json.loads(Path(info_file).read_text(encoding="utf-8"))
    if variant == "direct":
        make = triggerer.trigger_factory("ours", interval)
        port = int(info["port"])
        return triggerer.run_triggers(
            "ours", jobs, interval, window, make, lambda: triggerer.endpoint_stats(port)["calls"], phases
        )
    from airflow_hetero.triggers.queue import HeteroServiceJobTrigger

    queued = info["jobs"]

    def make_queued(i: int) -> Any:
        job = queued[i]
        return HeteroServiceJobTrigger(
            job["id"], job_name=job["name"], job_queue=QUEUE, aws_conn_id=triggerer.CONN_ID, poll_interval=interval
        )

    return triggerer.run_triggers(
        "queue", jobs, interval, window, make_queued, lambda: fetch_json(info["stats"]), phases
    )


def measure(
    variant: str, jobs: int, interval: float, window: float, phases: triggerer.Phases | None = None
) -> dict[str, float]:
    """Start ``variant``'s endpoint (its own process), then its triggerer (another)."""
    with tempfile.TemporaryDirectory() as tmp:
        info_file = os.path.join(tmp, "info.json")
        if variant == "queue":
            serve = [sys.executable, "-m", "benchmarks.queue_triggerer", "--serve", info_file]
        else:
            serve = [sys.executable, "-m", "benchmarks.triggerer", "--serve", os.path.join(tmp, "port")]
        server = subprocess.Popen([*serve, "--jobs", str(jobs)])
        try:
            ready = Path(info_file if variant == "queue" else os.path.join(tmp, "port"))
            until(lambda: (ready.exists() and ready.read_text(encoding="utf-8")) or server.poll() is not None,
                  "the endpoint", timeout=900)  # fmt: skip
            if server.poll() is not None:
                raise RuntimeError(f"the {variant} endpoint exited with {server.returncode}")
            if variant == "queue":
                url = json.loads(ready.read_text(encoding="utf-8"))["url"]
            else:
                port = int(ready.read_text(encoding="utf-8"))
                url = f"http://127.0.0.1:{port}"
                Path(info_file).write_text(json.dumps({"port": port}), encoding="utf-8")
            code = [sys.executable, "-m", "benchmarks.queue_triggerer", "--run", variant, "--info", info_file]
            code += ["--jobs", str(jobs), "--interval", str(interval), "--window", str(window)]
            code += (phases or triggerer.Phases()).argv()
            out = subprocess.run(code, env=triggerer.connection_env(url), check=True, capture_output=True, text=True)
        finally:
            server.kill()
            server.wait()
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# -- the report ----------------------------------------------------------------------------------------


def per_interval(result: dict[str, float], action: str) -> float:
    return result.get(f"calls:{action}", 0.0) / result["polls"]


def report(results: dict[str, dict[str, float]], jobs: int, interval: float) -> list[str]:
    """The table: calls per interval by action, then CPU, memory and lag, with queue / direct ratios."""
    pages = math.ceil((jobs + 1) / 100)
    lines = [
        f"Queue triggerer: {jobs} deferred jobs in one event loop, poll interval {interval:g}s "
        f"(queue: one listing of {pages} page(s) of 100 expected per interval)"
    ]
    variants = list(results)
    compared = variants == ["queue", "direct"]
    lines.append(f"{'':44}" + "".join(f"{VARIANTS[v]:>14}" for v in variants) + ("  queue/direct" if compared else ""))

    def row(label: str, values: list[float], fmt: str) -> None:
        line = f"{label:44}" + "".join(f"{fmt.format(v):>14}" for v in values)
        if compared and len(values) == 2:
            line += f"{values[0] / values[1]:>14.3f}" if values[1] else f"{'-':>14}"
        lines.append(line)

    for action in QUEUE_ACTIONS + DIRECT_ACTIONS:
        row(f"{action} per interval", [per_interval(results[v], action) for v in variants], "{:.2f}")
    totals = [sum(v for k, v in results[name].items() if k.startswith("calls:")) / results[name]["polls"]
              for name in variants]  # fmt: skip
    row("API calls per interval, all", totals, "{:.2f}")
    row("API calls per job per interval", [t / jobs for t in totals], "{:.4f}")
    for label, key, fmt in (
        ("steady CPU per job per poll (ms)", "cpu_ms_per_poll", "{:.3f}"),
        ("memory per trigger (MB)", "mb_per_trigger", "{:.3f}"),
        ("worst loop lag, N-1 starting (ms)", "lag_start_ms", "{:.0f}"),
        ("worst loop lag, steady (ms)", "lag_ms", "{:.0f}"),
        ("peak RSS (MB)", "peak_rss_mb", "{:.0f}"),
        ("intervals in the steady window", "polls", "{:.1f}"),
    ):
        row(label, [results[v][key] for v in variants], fmt)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--interval", type=float, default=10.0)
    parser.add_argument("--window", type=float, default=30.0)
    parser.add_argument("--only", choices=VARIANTS, help="run one variant (no ratios)")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--run", help=argparse.SUPPRESS)
    parser.add_argument("--info", help=argparse.SUPPRESS)
    triggerer.add_phase_options(parser)
    args = parser.parse_args(argv)
    phases = triggerer.Phases(args.warm_up, args.settle)
    if args.serve:
        serve_queue(args.serve, args.jobs)
        return 0
    if args.run:
        print(json.dumps(run_variant(args.run, args.info, args.jobs, args.interval, args.window, phases)))
        return 0
    variants = [args.only] if args.only else list(VARIANTS)
    results = {v: measure(v, args.jobs, args.interval, args.window, phases) for v in variants}
    print("\n".join(report(results, args.jobs, args.interval)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
