"""The endpoint under abuse: every limit answers clearly and leaves nothing behind.

Body cap (413), extraction and channel byte caps, unsafe channel names, the concurrent-host cap,
a full disk at create and during a run (faults injected into the endpoint's own writes).
"""

from __future__ import annotations

import errno
import http.client
import io
import json
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from support.local_jobkit import BUCKET, channel, pid_alive, put_source, request, unique, wait

from airflow_hetero.local import LocalEndpoint
from airflow_hetero.local.host.process import HostProcess
from airflow_hetero.local.training import store
from airflow_hetero.local.training.runner import JobRunner

pytestmark = pytest.mark.slow

CAP = 1024 * 1024
ENDPOINT_RUN: dict[str, Any] = {
    "max_request_bytes": CAP,
    "max_hosts": 4,
    "max_source_bytes": 2 * CAP,
    "max_channel_bytes": 2 * CAP,
}


def _post(
    endpoint: LocalEndpoint, path: str, body: bytes, headers: dict[str, str]
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=30)
    try:
        conn.request("PUT" if path != "/" else "POST", path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def test_a_body_over_the_cap_is_refused_with_413(endpoint: LocalEndpoint, s3: Any) -> None:
    key = unique("big")
    status, headers, body = _post(endpoint, f"/{BUCKET}/{key}", b"x" * (CAP + 1), {})
    assert status == 413 and headers["connection"] == "close"
    assert b"<Code>RequestEntityTooLarge</Code>" in body and f"limit of {CAP} bytes".encode() in body
    with pytest.raises(ClientError):
        s3.head_object(Bucket=BUCKET, Key=key)

    target = {"X-Amz-Target": "SageMaker.CreateTrainingJob", "Content-Type": "application/x-amz-json-1.1"}
    status, _, body = _post(endpoint, "/", b" " * (CAP + 1), target)
    assert status == 413 and json.loads(body)["__type"] == "RequestEntityTooLarge"

    def chunks() -> Any:
        for _ in range(3):
            yield b"y" * (CAP // 2)

    conn = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=30)
    conn.request("PUT", f"/{BUCKET}/{key}", body=chunks(), encode_chunked=True)
    assert conn.getresponse().status == 413
    conn.close()

    # under the cap passes, through the AWS SDK as well
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"z" * (CAP - 1000))
    assert s3.head_object(Bucket=BUCKET, Key=key)["ContentLength"] == CAP - 1000
    with pytest.raises(ClientError) as err:
        s3.put_object(Bucket=BUCKET, Key=key + "-2", Body=b"z" * (CAP + 1))
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 413


def _bomb(size: int) -> bytes:
    """A tiny gzipped tarball with ``train.py`` and one file of ``size`` zero bytes."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        script = b"print('ran')\n"
        info = tarfile.TarInfo("train.py")
        info.size = len(script)
        tar.addfile(info, io.BytesIO(script))
        info = tarfile.TarInfo("zeros.bin")
        info.size = size
        tar.addfile(info, io.BytesIO(bytes(size)))
    return buffer.getvalue()


def test_a_tar_bomb_fails_the_job_before_anything_is_written(endpoint: LocalEndpoint, sm: Any, s3: Any) -> None:
    job = unique("bomb")
    data = _bomb(64 * CAP)
    assert len(data) < CAP // 4
    s3.put_object(Bucket=BUCKET, Key=f"{job}/source.tar.gz", Body=data)
    sm.create_training_job(**request(job, f"s3://{BUCKET}/{job}/source.tar.gz"))
    done = wait(sm, job)
    assert done["TrainingJobStatus"] == "Failed"
    assert f"more than the local endpoint's limit of {2 * CAP}" in done["FailureReason"]
    assert "No host was started" in done["FailureReason"]
    written = sum(p.stat().st_size for p in endpoint.job_dir(job).rglob("*") if p.is_file())
    assert written < CAP  # only the record files


def test_a_channel_over_its_cap_fails_the_job(endpoint: LocalEndpoint, sm: Any, s3: Any) -> None:
    job = unique("bigchannel")
    for i in range(3):
        s3.put_object(Bucket=BUCKET, Key=f"{job}/data/part-{i}", Body=bytes(CAP))
    body = request(
        job, put_source(s3, job, "print('ran')\n"), channels=[channel("train", f"s3://{BUCKET}/{job}/data/")]
    )
    sm.create_training_job(**body)
    done = wait(sm, job)
    assert done["TrainingJobStatus"] == "Failed"
    assert done["FailureReason"].startswith("ClientError: Channel train: Data download failed:")
    assert f"limit of {2 * CAP} bytes per channel" in done["FailureReason"]
    assert not (endpoint.job_dir(job) / "hosts.json").exists()  # no host ran
    # sharded, each host of a 3-host group gets 1 part: within the cap
    sharded = unique("shardedchannel")
    body = request(
        sharded,
        put_source(s3, sharded, "print('ran')\n"),
        groups=(("data", "ml.c5.xlarge", 3),),
        channels=[channel("train", f"s3://{BUCKET}/{job}/data/", sharded=True)],
    )
    sm.create_training_job(**body)
    assert wait(sm, sharded)["TrainingJobStatus"] == "Completed"


@pytest.mark.parametrize("name", [".", ".."])
def test_channel_names_that_are_not_safe_path_components_are_refused(
    endpoint: LocalEndpoint, sm: Any, s3: Any, name: str
) -> None:
    job = unique("dotchannel")
    body = request(job, put_source(s3, job, "print('ran')\n"), channels=[channel(name, f"s3://{BUCKET}/{job}/")])
    with pytest.raises(ClientError) as err:
        sm.create_training_job(**body)
    assert err.value.response["Error"]["Code"] == "ValidationException"
    assert f"Channel names [{name}] are not safe directory names" in err.value.response["Error"]["Message"]
    assert not endpoint.job_dir(job).exists()


def _late_release(monkeypatch: pytest.MonkeyPatch, delay: float) -> None:
    """Make every runner of the endpoint pause ``delay`` seconds just before it ends (a loaded machine:
    the job's thread is not scheduled for a while once the job's ending is recorded)."""
    real = JobRunner._run

    def run(self: JobRunner) -> None:
        done = self._on_done

        def late(name: str) -> None:
            time.sleep(delay)
            done(name)

        self._on_done = late  # type: ignore[method-assign]
        real(self)

    monkeypatch.setattr(JobRunner, "_run", run)


@pytest.mark.parametrize("delay", [0.0, 0.5], ids=["prompt-end", "late-end"])
def test_hosts_beyond_the_cap_answer_resource_limit_exceeded(
    endpoint: LocalEndpoint, sm: Any, s3: Any, monkeypatch: pytest.MonkeyPatch, delay: float
) -> None:
    if delay:
        _late_release(monkeypatch, delay)
    first, second, third = unique("cap-a"), unique("cap-b"), unique("cap-c")
    sleeper = "import time\ntime.sleep(60)\n"
    sm.create_training_job(**request(first, put_source(s3, first, sleeper)))  # 3 of 4 hosts
    with pytest.raises(ClientError) as err:
        sm.create_training_job(**request(second, put_source(s3, second, sleeper)))
    error = err.value.response["Error"]
    assert error["Code"] == "ResourceLimitExceeded"
    assert (
        "is 4 Instances, with current utilization of 3 Instances and a request delta of 3 Instances" in error["Message"]
    )
    assert not endpoint.job_dir(second).exists()
    one = request(third, put_source(s3, third, "print('fits')\n"), groups=(("solo", "ml.c5.xlarge", 1),))
    sm.create_training_job(**one)  # 3 + 1 fits
    assert wait(sm, third)["TrainingJobStatus"] == "Completed"
    sm.stop_training_job(TrainingJobName=first)
    wait(sm, first)
    sm.create_training_job(**request(second, put_source(s3, second, "print('now')\n")))
    assert wait(sm, second)["TrainingJobStatus"] == "Completed"


def test_a_full_disk_at_create_leaves_no_record(
    endpoint: LocalEndpoint, sm: Any, s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = unique("fullcreate")
    body = request(job, put_source(s3, job, "print('ran')\n"))
    real = store._write_json

    def full(path: Path, data: Any) -> None:
        if path.name == store.RECORD_FILE:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, data)

    monkeypatch.setattr(store, "_write_json", full)
    with pytest.raises(ClientError) as err:
        sm.create_training_job(**body)
    response = err.value.response
    assert response["Error"]["Code"] == "ResourceLimitExceeded"
    assert "No space left on device" in response["Error"]["Message"]
    assert response["ResponseMetadata"]["RetryAttempts"] == 0  # a 4xx: seen once, not retried
    assert not endpoint.job_dir(job).exists()
    with pytest.raises(ClientError):
        sm.describe_training_job(TrainingJobName=job)
    assert job not in [s["TrainingJobName"] for s in sm.list_training_jobs(NameContains=job)["TrainingJobSummaries"]]
    monkeypatch.setattr(store, "_write_json", real)
    sm.create_training_job(**body)  # the same name is free again
    assert wait(sm, job)["TrainingJobStatus"] == "Completed"


def test_a_full_disk_during_the_run_fails_the_job_with_a_reason(
    endpoint: LocalEndpoint, sm: Any, s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = unique("fullrun")
    script = """
        import sys
        for i in range(200000):  # far more than a pipe buffer: a dead reader would block this host
            print("line", i, "x" * 100)
        import time
        time.sleep(60)
    """
    written: list[int] = []
    real = HostProcess._append

    def filling(self: HostProcess, line: str) -> None:
        if self.name == "algo-2" and len(written) > 500:
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(1)
        real(self, line)

    monkeypatch.setattr(HostProcess, "_append", filling)
    sm.create_training_job(**request(job, put_source(s3, job, script), max_runtime=120))
    started = time.monotonic()
    done = wait(sm, job, timeout=60)
    assert time.monotonic() - started < 30  # not stalled until MaxRuntime
    assert done["TrainingJobStatus"] == "Failed"
    reason = done["FailureReason"]
    assert reason.startswith("ClientError: The local endpoint could not record the output of host algo-2")
    assert "No space left on device" in reason
    facts = json.loads((endpoint.job_dir(job) / "hosts.json").read_text())
    assert not any(pid_alive(f["pid"]) for f in facts)


def test_parallel_creates_never_exceed_the_host_cap(endpoint: LocalEndpoint, sm: Any, s3: Any) -> None:
    import concurrent.futures

    source = put_source(s3, unique("parallel"), "import time\ntime.sleep(60)\n")
    names = [unique("parallel") for _ in range(12)]

    def create(name: str) -> str:
        try:
            sm.create_training_job(**request(name, source, groups=(("solo", "ml.c5.xlarge", 2),)))
            return "created"
        except ClientError as err:
            return str(err.response["Error"]["Code"])

    with concurrent.futures.ThreadPoolExecutor(max_workers=12) as pool:
        answers = dict(zip(names, pool.map(create, names), strict=True))
    created = [n for n, a in answers.items() if a == "created"]
    assert len(created) == 2  # 2 jobs x 2 hosts = the cap of 4
    assert {a for a in answers.values() if a != "created"} == {"ResourceLimitExceeded"}
    assert all(endpoint.job_dir(n).exists() == (n in created) for n in names)
    for name in created:
        sm.stop_training_job(TrainingJobName=name)
    for name in created:
        assert wait(sm, name)["TrainingJobStatus"] == "Stopped"
