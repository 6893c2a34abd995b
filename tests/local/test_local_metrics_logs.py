"""Metrics sampling and log shipping on their own, with real processes and recording clients."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

from airflow_hetero.local.logship import LOG_GROUP, LogShipper, stream_name
from airflow_hetero.local.metrics import NAMESPACE, MetricsSampler


class _Recorder:
    """Stands in for a boto3 client: records calls by operation name."""

    class exceptions:  # mirrors boto3 client.exceptions
        class ResourceAlreadyExistsException(Exception):
            pass

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        def call(**kwargs: Any) -> dict[str, Any]:
            self.calls.append((name, kwargs))
            return {}

        return call


def test_sampler_measures_a_busy_host_and_its_children() -> None:
    busy = (
        "import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', 'while True: pass'])\ntime.sleep(30)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", busy], start_new_session=True)
    try:
        cloudwatch = _Recorder()
        sampler = MetricsSampler(cloudwatch, "job-1", interval=60)
        sampler.watch("algo-2", proc.pid)
        sampler.sample()  # primes the CPU counters
        time.sleep(0.3)
        sampler.sample()  # the spinning child is found and primed
        time.sleep(0.6)
        figures = sampler.sample()
        cpu, memory = figures["algo-2"]
        assert cpu > 40  # the child spins one core; the leader sleeps
        assert 0 < memory < 100
        sampler.publish(figures)
        ((name, call),) = cloudwatch.calls
        assert name == "put_metric_data"
        assert call["Namespace"] == NAMESPACE == "/aws/sagemaker/TrainingJobs"
        assert {d["MetricName"] for d in call["MetricData"]} == {"CPUUtilization", "MemoryUtilization"}
        assert all(d["Dimensions"] == [{"Name": "Host", "Value": "job-1/algo-2"}] for d in call["MetricData"])
        sampler.unwatch("algo-2")
        assert sampler.sample() == {}
    finally:
        import os
        import signal

        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_shipper_batches_in_order_and_drops_empty_lines() -> None:
    logs = _Recorder()
    shipper = LogShipper(logs, interval=60)
    stream = stream_name("job-1", "algo-1", 1_700_000_000)
    assert stream == "job-1/algo-1-1700000000"
    shipper.open_stream(stream)
    shipper.emit(stream, "second", 2000)
    shipper.emit(stream, "", 1500)
    shipper.emit(stream, "first", 1000)
    shipper.close()
    names = [name for name, _ in logs.calls]
    assert names == ["create_log_group", "create_log_stream", "put_log_events"]
    put = logs.calls[-1][1]
    assert put["logGroupName"] == LOG_GROUP
    assert [e["message"] for e in put["logEvents"]] == ["first", "second"]


def test_shipper_splits_large_batches() -> None:
    logs = _Recorder()
    shipper = LogShipper(logs, interval=60)
    shipper.open_stream("s")
    for i in range(25_000):
        shipper.emit("s", f"line {i}", 1000 + i)
    shipper.flush()
    puts = [call for name, call in logs.calls if name == "put_log_events"]
    assert [len(p["logEvents"]) for p in puts] == [10_000, 10_000, 5_000]
    assert puts[2]["logEvents"][-1]["message"] == "line 24999"
