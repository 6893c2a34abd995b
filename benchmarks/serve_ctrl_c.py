"""Ctrl-C of ``airflow-hetero local serve``, round after round, on a busy machine: hangs, exits, hosts left.

Each round starts ``python -m airflow_hetero.local serve`` on a fresh workdir, creates one heterogeneous job
whose two hosts sleep, keeps client threads calling ListTrainingJobs without a pause (the server starts a
thread per request), and sends SIGINT while CPU burners keep every core busy. A round **hangs** when the
endpoint has not exited ``--deadline`` seconds after the signal (it is then killed, with its stacks dumped
by py-spy where that is installed); a **host left** is a process carrying the round's host mark still
alive once the endpoint exited. Figures: the time from SIGINT to exit, median and maximum.

Target (issue 34): 0 hangs and 0 hosts left in 200 rounds.

    python -m benchmarks.serve_ctrl_c [--rounds 200] [--burners 4] [--clients 4] [--deadline 60]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import queue
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BUCKET = "ctrl-c-bench"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.1-cpu-py310"
#: The endpoint's grace for a job's hosts at stop (``--stop-grace``), as the shutdown tests use.
GRACE = 1.0
#: Seconds for the banner, and for the job's hosts to be running.
START_DEADLINE = 120.0
SLEEPING_HOST = "import time\nprint('host up', flush=True)\ntime.sleep(600)\n"
_BURN = """
import os, sys, time
parent, end = int(sys.argv[1]), time.monotonic() + float(sys.argv[2])
while os.getppid() == parent and time.monotonic() < end:
    for _ in range(20000):
        pass
"""


@dataclass
class Round:
    """What one Ctrl-C did."""

    exit_seconds: float | None  # None: hung
    exit_code: int | None
    hosts_left: list[int] = field(default_factory=list)
    said_stopped: bool = False


class Output:
    """A child's stdout, followed by a thread; every read has a deadline."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._read, args=(proc.stdout,), daemon=True)
        self._thread.start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def until(self, prefix: str, timeout: float) -> bool:
        """Whether a line starting with ``prefix`` came within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._queue.get(timeout=left)
            except queue.Empty:
                return False
            if line is None:
                return False
            self.lines.append(line)
            if line.startswith(prefix):
                return True
        return False


@contextmanager
def burners(count: int, limit: float) -> Iterator[None]:
    """``count`` CPU-spinning processes for the block (they end by themselves if this process dies)."""
    procs = [subprocess.Popen([sys.executable, "-c", _BURN, str(os.getpid()), str(limit)]) for _ in range(count)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait(30)


@contextmanager
def busy(url: str, threads: int) -> Iterator[None]:
    """Client threads calling ListTrainingJobs without a pause."""
    from airflow_hetero.local.training.clients import make_client

    stop = threading.Event()

    def call() -> None:
        sm = make_client("sagemaker", url)
        while not stop.is_set():
            try:
                sm.list_training_jobs()
            except Exception:  # the endpoint is going away
                stop.wait(0.1)

    workers = [threading.Thread(target=call, daemon=True) for _ in range(threads)]
    for worker in workers:
        worker.start()
    try:
        yield
    finally:
        stop.set()
        for worker in workers:
            worker.join(30)


def _source() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        data = SLEEPING_HOST.encode()
        info = tarfile.TarInfo("train.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _start_job(url: str, name: str, workdir: Path) -> None:
    """Create a job of two sleeping hosts (one per group); return once both shims are running."""
    from airflow_hetero.local.training.clients import make_client

    s3, sm = make_client("s3", url), make_client("sagemaker", url)
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key=f"{name}/sourcedir.tar.gz", Body=_source())
    source = f"s3://{BUCKET}/{name}/sourcedir.tar.gz"
    sm.create_training_job(
        TrainingJobName=name,
        RoleArn=ROLE,
        AlgorithmSpecification={"TrainingImage": IMAGE, "TrainingInputMode": "File"},
        HyperParameters={
            "sagemaker_program": json.dumps("train.py"),
            "sagemaker_submit_directory": json.dumps(source),
        },
        OutputDataConfig={"S3OutputPath": f"s3://{BUCKET}/output"},
        ResourceConfig={
            "InstanceGroups": [
                {"InstanceGroupName": "data", "InstanceType": "ml.c5.xlarge", "InstanceCount": 1},
                {"InstanceGroupName": "dnn", "InstanceType": "ml.p3.2xlarge", "InstanceCount": 1},
            ],
            "VolumeSizeInGB": 30,
        },
        StoppingCondition={"MaxRuntimeInSeconds": 600},
    )
    hosts = workdir / "jobs" / name / "hosts.json"
    deadline = time.monotonic() + START_DEADLINE
    while not (hosts.exists() and len(json.loads(hosts.read_text() or "[]")) == 2):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the hosts of {name} did not start within {START_DEADLINE:.0f} s")
        time.sleep(0.1)


def _dump_stacks(pid: int) -> str:
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        return "(py-spy not installed: no stacks)"
    done = subprocess.run([spy, "dump", "--pid", str(pid)], check=False, capture_output=True, text=True, timeout=60)
    return done.stdout + done.stderr


def one_round(index: int, base: Path, clients: int, deadline: float) -> Round:
    from airflow_hetero.local.host.process import kill_tree, marked

    workdir = base / f"round-{index}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "airflow_hetero.local", "serve", "--workdir", str(workdir), "--stop-grace", str(GRACE)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    out = Output(proc)
    try:
        if not out.until("Press Ctrl-C", START_DEADLINE):
            raise RuntimeError(f"round {index}: the endpoint did not start: {out.lines[-5:]}")
        url = next(line.split("listening on ")[1].split()[0] for line in out.lines if "listening on " in line)
        _start_job(url, f"ctrl-c-{index}", workdir)
        with busy(url, clients):
            time.sleep(0.2)  # the clients are calling
            started = time.monotonic()
            proc.send_signal(signal.SIGINT)
            said = out.until("stopped.", deadline)
            try:
                code: int | None = proc.wait(max(0.0, started + deadline - time.monotonic()))
                seconds: float | None = time.monotonic() - started
            except subprocess.TimeoutExpired:
                print(f"round {index}: HUNG; stacks:\n{_dump_stacks(proc.pid)}", file=sys.stderr)
                code, seconds = None, None
        time.sleep(0.2)  # a host's last exit settles
        left = sorted(marked(workdir))
        return Round(seconds, code, left, said)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        kill_tree(root=workdir)
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.serve_ctrl_c", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--burners", type=int, default=2 * (os.cpu_count() or 1), help="CPU burners (2 per core)")
    parser.add_argument("--clients", type=int, default=4, help="client threads calling without a pause")
    parser.add_argument("--deadline", type=float, default=60.0, help="seconds after SIGINT that count as a hang")
    args = parser.parse_args(argv)
    rounds: list[Round] = []
    with tempfile.TemporaryDirectory(prefix="ctrl-c-bench-") as tmp, burners(args.burners, 24 * 3600):
        for index in range(args.rounds):
            result = one_round(index, Path(tmp), args.clients, args.deadline)
            rounds.append(result)
            if result.exit_seconds is None or result.hosts_left or result.exit_code != 0:
                print(f"round {index}: {result}", flush=True)
            elif index % 10 == 9:
                print(f"{index + 1} rounds, last exit {result.exit_seconds:.2f} s", flush=True)
    hangs = sum(r.exit_seconds is None for r in rounds)
    left = sum(len(r.hosts_left) for r in rounds)
    bad_exit = sum(r.exit_seconds is not None and r.exit_code != 0 for r in rounds)
    times = [r.exit_seconds for r in rounds if r.exit_seconds is not None]
    print(f"local serve Ctrl-C, {len(rounds)} rounds, {args.burners} burners, {args.clients} busy clients")
    print(f"  hangs: {hangs}   hosts left: {left}   exits other than 0: {bad_exit}")
    if times:
        print(f"  SIGINT to exit: median {statistics.median(times):.2f} s, max {max(times):.2f} s")
    return 1 if hangs or left or bad_exit else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
