"""End to end: heterogeneous jobs really run as local processes behind a real endpoint."""

from __future__ import annotations

import io
import json
import re
import socket
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from support.local_jobkit import (
    BUCKET,
    channel,
    host_metric_names,
    log_lines,
    pid_alive,
    put_source,
    request,
    tarball,
    unique,
    wait,
)

from airflow_hetero.local import LocalEndpoint

pytestmark = pytest.mark.slow

WORKER = """
    import json, os, sys, time
    host = os.environ["SM_CURRENT_HOST"]
    group = os.environ["SM_CURRENT_INSTANCE_GROUP"]
    print(f"hello from {host} in {group} args={sys.argv[1:]}")
    print("loss=0.5", file=sys.stderr)
    with open(os.path.join(os.environ["SM_MODEL_DIR"], f"{host}.json"), "w") as f:
        json.dump({"group": group, "channels": json.loads(os.environ["SM_CHANNELS"]),
                   "base": os.environ["SAGEMAKER_BASE_DIR"]}, f)
    with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"{host}.txt"), "w") as f:
        f.write("out")
    time.sleep(0.8)
"""


def _hosts(endpoint: LocalEndpoint, job: str) -> dict[str, dict[str, Any]]:
    """Host -> its resourceconfig.json, read from the host's own layout."""
    root = endpoint.job_dir(job) / "hosts"
    return {p.name: json.loads((p / "input/config/resourceconfig.json").read_text()) for p in sorted(root.iterdir())}


def _tar_members(s3: Any, uri: str) -> dict[str, bytes]:
    key = uri.removeprefix(f"s3://{BUCKET}/")
    data = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def test_completed_job_runs_every_host_and_uploads_the_model(
    endpoint: LocalEndpoint, sm: Any, s3: Any, logs: Any
) -> None:
    job = unique("complete")
    body = request(job, put_source(s3, job, WORKER), hyperparameters={"epochs": 3, "mode": "fast"})
    arn = sm.create_training_job(**body)["TrainingJobArn"]
    assert arn == f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{job}"
    running = sm.describe_training_job(TrainingJobName=job)
    assert running["TrainingJobStatus"] == "InProgress"
    done = wait(sm, job)

    assert done["TrainingJobStatus"] == "Completed", done.get("FailureReason")
    assert done["SecondaryStatus"] == "Completed"
    transitions = done["SecondaryStatusTransitions"]
    assert [t["Status"] for t in transitions] == ["Starting", "Downloading", "Training", "Uploading", "Completed"]
    assert all(t["StatusMessage"] and t["StartTime"] <= t["EndTime"] for t in transitions)
    assert done["CreationTime"] <= done["TrainingStartTime"] <= done["TrainingEndTime"] == done["LastModifiedTime"]
    assert done["TrainingTimeInSeconds"] >= 1
    assert done["BillableTimeInSeconds"] == done["TrainingTimeInSeconds"]  # wall clock, not x instances
    assert done["ResourceConfig"] == body["ResourceConfig"]
    assert "InstanceCount" not in done["ResourceConfig"]
    for key in ("HyperParameters", "AlgorithmSpecification", "StoppingCondition", "RoleArn"):
        assert done[key] == body[key]
    assert done["OutputDataConfig"] == {**body["OutputDataConfig"], "KmsKeyId": ""}  # as SageMaker echoes it
    assert "FailureReason" not in done

    model_uri = f"s3://{BUCKET}/output/{job}/output/model.tar.gz"
    assert done["ModelArtifacts"] == {"S3ModelArtifacts": model_uri}
    model = _tar_members(s3, model_uri)
    hosts = _hosts(endpoint, job)
    assert sorted(hosts) == ["algo-1", "algo-2", "algo-3"]
    assert sorted(model) == [f"{h}.json" for h in sorted(hosts)]
    for host, config in hosts.items():
        written = json.loads(model[f"{host}.json"])
        assert written["group"] == config["current_group_name"]
        assert written["base"] == str(endpoint.job_dir(job) / "hosts" / host)
    output = _tar_members(s3, f"s3://{BUCKET}/output/{job}/output/output.tar.gz")
    assert sorted(output) == [f"{h}.txt" for h in sorted(hosts)]

    streams = log_lines(logs, job)
    assert len(streams) == 3
    for stream, lines in streams.items():
        match = re.fullmatch(rf"{job}/(algo-\d)-(\d{{10}})", stream)
        assert match, stream
        host = match.group(1)
        group = hosts[host]["current_group_name"]
        assert f"SM_CURRENT_HOST={host}" in lines
        assert f"SM_CURRENT_INSTANCE_GROUP={group}" in lines
        groups_dict = json.loads(next(x for x in lines if x.startswith("SM_INSTANCE_GROUPS_DICT=")).split("=", 1)[1])
        assert groups_dict[group]["hosts"] == hosts[host]["instance_groups"][0 if group == "data" else 1]["hosts"]
        assert f"hello from {host} in {group} args=['--epochs', '3', '--mode', 'fast']" in lines
        assert "loss=0.5" in lines
        assert lines.index(f"SM_CURRENT_HOST={host}") < lines.index("loss=0.5")

    cloudwatch = endpoint.client("cloudwatch")
    for host in hosts:
        assert host_metric_names(cloudwatch, job, host) == {"CPUUtilization", "MemoryUtilization"}


def test_resource_config_is_shaped_like_sagemakers(endpoint: LocalEndpoint, sm: Any, s3: Any) -> None:
    job = unique("layout")
    body = request(
        job,
        put_source(s3, job, "print('ok')\n"),
        groups=(("a", "ml.c5.xlarge", 2), ("b", "ml.m5.large", 1), ("c", "ml.p3.2xlarge", 2)),
    )
    sm.create_training_job(**body)
    assert wait(sm, job)["TrainingJobStatus"] == "Completed"
    hosts = _hosts(endpoint, job)
    members: dict[str, list[str]] = {}
    for host, config in hosts.items():
        assert list(config) == [
            "current_host",
            "current_instance_type",
            "current_group_name",
            "hosts",
            "instance_groups",
            "network_interface_name",
        ]
        assert config["current_host"] == host
        assert config["hosts"] == [f"algo-{n}" for n in range(1, 6)]
        assert [g["instance_group_name"] for g in config["instance_groups"]] == ["a", "b", "c"]
        assert [g["instance_type"] for g in config["instance_groups"]] == [
            "ml.c5.xlarge",
            "ml.m5.large",
            "ml.p3.2xlarge",
        ]
        groups = {g["instance_group_name"]: g["hosts"] for g in config["instance_groups"]}
        assert host in groups[config["current_group_name"]]
        members = members or groups
        assert groups == members  # every host sees the same cluster
    assert sorted(h for group in members.values() for h in group) == sorted(hosts)
    assert [len(members[g]) for g in "abc"] == [2, 1, 2]
    hps = json.loads((endpoint.job_dir(job) / "hosts/algo-1/input/config/hyperparameters.json").read_text())
    assert hps == body["HyperParameters"]


def test_failing_host_fails_the_job_and_ends_the_others(endpoint: LocalEndpoint, sm: Any, s3: Any) -> None:
    # the dnn host fails once both data hosts have started their child (hosts/algo-N/model/child.pid,
    # written whole): on a loaded machine a host can take longer than any fixed pause to get there
    script = """
        import glob, os, subprocess, sys, time
        model_dir = os.environ["SM_MODEL_DIR"]
        if os.environ["SM_CURRENT_INSTANCE_GROUP"] == "dnn":
            hosts = os.path.dirname(os.path.dirname(model_dir))
            while len(glob.glob(os.path.join(hosts, "*", "model", "child.pid"))) < 2:
                time.sleep(0.05)
            print("about to fail")
            print("Traceback (most recent call last):", file=sys.stderr)
            print("ValueError: boom in the dnn group", file=sys.stderr)
            sys.exit(3)
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        with open(os.path.join(model_dir, "child.pid.tmp"), "w") as f:
            f.write(str(child.pid))
        os.replace(os.path.join(model_dir, "child.pid.tmp"), os.path.join(model_dir, "child.pid"))
        time.sleep(60)
    """
    job = unique("fail")
    sm.create_training_job(**request(job, put_source(s3, job, script)))
    started = time.monotonic()
    done = wait(sm, job, timeout=40)
    assert time.monotonic() - started < 40  # the data hosts were ended, not left to their 60 s
    assert done["TrainingJobStatus"] == "Failed"
    assert done["SecondaryStatus"] == "Failed"
    assert [t["Status"] for t in done["SecondaryStatusTransitions"]][-1] == "Failed"
    dnn_host = next(h for h, c in _hosts(endpoint, job).items() if c["current_group_name"] == "dnn")
    reason = done["FailureReason"]
    assert reason.startswith(f"AlgorithmError: host {dnn_host} (instance group dnn) exited with code 3.")
    assert "ValueError: boom in the dnn group" in reason
    # named on every ended job (botocore requires it), though a failed job uploads no model
    model_uri = f"s3://{BUCKET}/output/{job}/output/model.tar.gz"
    assert done["ModelArtifacts"] == {"S3ModelArtifacts": model_uri}
    with pytest.raises(ClientError):
        s3.head_object(Bucket=BUCKET, Key=model_uri.removeprefix(f"s3://{BUCKET}/"))
    facts = json.loads((endpoint.job_dir(job) / "hosts.json").read_text())
    children = [int((Path(f["base_dir"]) / "model/child.pid").read_text()) for f in facts if f["group"] == "data"]
    assert len(children) == 2
    assert not any(pid_alive(f["pid"]) for f in facts)
    assert not any(pid_alive(pid) for pid in children)  # the whole process group went, no orphans


def test_failure_file_is_the_reason(sm: Any, s3: Any) -> None:
    script = """
        import os, sys
        with open(os.path.join(os.environ["SM_OUTPUT_DIR"], "failure"), "w") as f:
            f.write("ExecuteUserScriptError: custom failure written by the script")
        sys.exit(1)
    """
    job = unique("failfile")
    sm.create_training_job(**request(job, put_source(s3, job, script), groups=(("only", "ml.m5.large", 1),)))
    done = wait(sm, job)
    assert done["FailureReason"] == (
        "AlgorithmError: host algo-1 (instance group only) exited with code 1. Last "
        "error lines:\nExecuteUserScriptError: custom failure written by the script"
    )


def test_stop_training_job_terminates_every_host(endpoint: LocalEndpoint, sm: Any, s3: Any, logs: Any) -> None:
    script = """
        import os, signal, subprocess, sys, time
        host, group = os.environ["SM_CURRENT_HOST"], os.environ["SM_CURRENT_INSTANCE_GROUP"]
        def save(*_):
            with open(os.path.join(os.environ["SM_MODEL_DIR"], "saved-on-sigterm.txt"), "w") as f:
                f.write(host)
            sys.exit(0)
        if group == "dnn":
            signal.signal(signal.SIGTERM, save)
        else:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # only SIGKILL ends these
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        with open(os.path.join(os.environ["SM_MODEL_DIR"], f"{host}.pid"), "w") as f:
            f.write(str(child.pid))
        print(f"started {host}", flush=True)
        time.sleep(60)
    """
    job = unique("stop")
    sm.create_training_job(**request(job, put_source(s3, job, script)))
    wait(sm, job, secondary="Training")
    deadline = time.monotonic() + 10
    while sum(any(x.startswith("started") for x in lines) for lines in log_lines(logs, job).values()) < 3:
        assert time.monotonic() < deadline, "host output did not reach CloudWatch Logs while running"
        time.sleep(0.1)

    sm.stop_training_job(TrainingJobName=job)
    stopping = sm.describe_training_job(TrainingJobName=job)
    assert stopping["TrainingJobStatus"] in ("Stopping", "Stopped")
    sm.stop_training_job(TrainingJobName=job)  # stopping twice is fine, as on SageMaker
    done = wait(sm, job)
    assert done["TrainingJobStatus"] == "Stopped"
    assert done["SecondaryStatus"] == "Stopped"
    assert [t["Status"] for t in done["SecondaryStatusTransitions"]][-2:] == ["Stopping", "Stopped"]
    model = _tar_members(s3, done["ModelArtifacts"]["S3ModelArtifacts"])
    dnn_host = next(h for h, c in _hosts(endpoint, job).items() if c["current_group_name"] == "dnn")
    assert model["saved-on-sigterm.txt"] == dnn_host.encode()
    facts = json.loads((endpoint.job_dir(job) / "hosts.json").read_text())
    children = [int(model[f"{f['host']}.pid"]) for f in facts]
    assert not any(pid_alive(f["pid"]) for f in facts)
    assert not any(pid_alive(pid) for pid in children)
    with pytest.raises(ClientError) as err:
        sm.stop_training_job(TrainingJobName=job)
    assert err.value.response["Error"]["Code"] == "ValidationException"
    assert "Stopped" in err.value.response["Error"]["Message"]


@pytest.mark.parametrize("answer_delay", [0.0, 0.5], ids=["prompt-answer", "slow-answer"])
def test_max_runtime_stops_the_job(sm: Any, s3: Any, answer_delay: float) -> None:
    job = unique("maxrt")
    body = request(job, put_source(s3, job, "import time\ntime.sleep(60)\n"), max_runtime=2)
    # slow-answer: the create's answer reaches the test late (a loaded machine), the job's clock runs already
    event = "after-call.sagemaker.CreateTrainingJob"

    def late(**_: Any) -> None:
        time.sleep(answer_delay)

    sm.meta.events.register(event, late)
    started = time.monotonic()  # before the create: the job's MaxRuntime cannot start earlier
    try:
        sm.create_training_job(**body)
    finally:
        sm.meta.events.unregister(event, late)
    done = wait(sm, job)
    assert 2 <= time.monotonic() - started < 10
    assert done["TrainingJobStatus"] == "Stopped"
    assert done["SecondaryStatus"] == "MaxRuntimeExceeded"
    assert "MaxRuntimeInSeconds" in done["SecondaryStatusTransitions"][-1]["StatusMessage"]


def test_channels_reach_only_their_groups(endpoint: LocalEndpoint, sm: Any, s3: Any) -> None:
    job = unique("channels")
    for name in ("train", "prep", "common"):
        s3.put_object(Bucket=BUCKET, Key=f"{job}/{name}/part-0.csv", Body=name.encode())
    channels = [
        channel("train", f"s3://{BUCKET}/{job}/train", ["dnn"]),
        channel("prep", f"s3://{BUCKET}/{job}/prep/", ["data"]),
        channel("common", f"s3://{BUCKET}/{job}/common", ["data", "dnn"]),
    ]
    sm.create_training_job(**request(job, put_source(s3, job, WORKER), channels=channels))
    assert wait(sm, job)["TrainingJobStatus"] == "Completed"
    for host, config in _hosts(endpoint, job).items():
        base = endpoint.job_dir(job) / "hosts" / host
        expected = ["common", "train"] if config["current_group_name"] == "dnn" else ["common", "prep"]
        assert sorted(p.name for p in (base / "input/data").iterdir()) == expected
        for name in expected:
            assert (base / "input/data" / name / "part-0.csv").read_text() == name
        data_config = json.loads((base / "input/config/inputdataconfig.json").read_text())
        assert sorted(data_config) == expected
        assert data_config["common"] == {
            "TrainingInputMode": "File",
            "S3DistributionType": "FullyReplicated",
            "RecordWrapperType": "None",
        }
        assert json.loads((base / f"model/{host}.json").read_text())["channels"] == expected


def test_sharded_by_s3_key_splits_objects_among_the_group(endpoint: LocalEndpoint, sm: Any, s3: Any) -> None:
    job = unique("sharded")
    keys = [f"shard-{i}.csv" for i in range(5)]
    for key in keys:
        s3.put_object(Bucket=BUCKET, Key=f"{job}/shards/{key}", Body=key.encode())
    s3.put_object(Bucket=BUCKET, Key=f"{job}/full/all.csv", Body=b"all")
    channels = [
        channel("shards", f"s3://{BUCKET}/{job}/shards", ["data"], sharded=True),
        channel("full", f"s3://{BUCKET}/{job}/full", ["data", "dnn"]),
    ]
    sm.create_training_job(
        **request(
            job,
            put_source(s3, job, "print('ok')\n"),
            channels=channels,
            groups=(("data", "ml.c5.xlarge", 2), ("dnn", "ml.p3.2xlarge", 1)),
        )
    )
    assert wait(sm, job)["TrainingJobStatus"] == "Completed"
    shares = []
    for host, config in _hosts(endpoint, job).items():
        data = endpoint.job_dir(job) / "hosts" / host / "input/data"
        assert (data / "full/all.csv").read_text() == "all"  # FullyReplicated: every host has everything
        if config["current_group_name"] == "data":
            shares.append(sorted(p.name for p in (data / "shards").iterdir()))
        else:
            assert not (data / "shards").exists()
    assert sorted(len(s) for s in shares) == [2, 3]
    assert sorted(shares[0] + shares[1]) == keys


def test_toolkit_environment_inside_a_host_reports_its_group(endpoint: LocalEndpoint, sm: Any, s3: Any) -> None:
    pytest.importorskip("sagemaker_training")
    script = """
        import json, os
        from sagemaker_training import environment
        env = environment.Environment()
        theirs = env.to_env_vars()
        with open(os.path.join(env.model_dir, env.current_host + ".json"), "w") as f:
            json.dump({"host": env.current_host, "group": env.current_instance_group,
                       "group_hosts": env.current_instance_group_hosts, "is_hetero": env.is_hetero,
                       "distribution_hosts": env.distribution_hosts, "master": env.master_hostname,
                       "channels": env.channel_input_dirs, "hps": env.hyperparameters,
                       "theirs": theirs, "ours": {k: os.environ.get(k) for k in theirs}}, f)
    """
    job = unique("toolkit")
    s3.put_object(Bucket=BUCKET, Key=f"{job}/train/x.csv", Body=b"1")
    body = request(
        job,
        put_source(s3, job, script),
        channels=[channel("train", f"s3://{BUCKET}/{job}/train")],
        hyperparameters={
            "epochs": 2,
            "sagemaker_distribution_instance_groups": ["dnn"],
            "sagemaker_torch_distributed_enabled": True,
        },
    )
    sm.create_training_job(**body)
    done = wait(sm, job, timeout=60)
    assert done["TrainingJobStatus"] == "Completed", done.get("FailureReason")
    hosts = _hosts(endpoint, job)
    for host, config in hosts.items():
        seen = json.loads((endpoint.job_dir(job) / "hosts" / host / "model" / f"{host}.json").read_text())
        group = config["current_group_name"]
        members = {g["instance_group_name"]: g["hosts"] for g in config["instance_groups"]}
        assert seen["host"] == host
        assert seen["group"] == group
        assert seen["group_hosts"] == members[group]
        assert seen["is_hetero"] is True
        assert seen["distribution_hosts"] == members["dnn"]
        assert seen["master"] == members["dnn"][0]
        assert seen["hps"] == {"epochs": 2}
        assert seen["channels"] == {"train": str(endpoint.job_dir(job) / "hosts" / host / "input/data/train")}
        assert seen["ours"] == seen["theirs"]  # every SM_* variable exactly as the toolkit computes it


def test_hosts_reach_each_other_on_their_own_addresses(endpoint: LocalEndpoint, sm: Any, s3: Any) -> None:
    script = """
        import json, os, socket, sys, time
        addresses = json.loads(os.environ["AIRFLOW_HETERO_HOST_ADDRESSES"])
        me = os.environ["SM_CURRENT_HOST"]
        port = int(sys.argv[sys.argv.index("--port") + 1])
        groups = json.loads(os.environ["SM_INSTANCE_GROUPS_DICT"])
        if os.environ["SM_CURRENT_INSTANCE_GROUP"] == "data":
            server = socket.socket()
            server.bind((addresses[me], port))  # every data host: the same port, its own address
            server.listen()
            server.settimeout(20)
            conn, _ = server.accept()
            conn.sendall(me.encode())
            conn.close()
        else:
            got = {}
            for host in groups["data"]["hosts"]:
                deadline = time.time() + 15
                while True:
                    try:
                        with socket.create_connection((addresses[host], port), timeout=2) as c:
                            got[host] = c.recv(100).decode()
                            break
                    except OSError:
                        if time.time() > deadline:
                            raise
                        time.sleep(0.05)
            with open(os.path.join(os.environ["SM_MODEL_DIR"], "peers.json"), "w") as f:
                json.dump({"got": got, "addresses": addresses}, f)
    """
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    job = unique("network")
    sm.create_training_job(**request(job, put_source(s3, job, script), hyperparameters={"port": port}))
    done = wait(sm, job)
    assert done["TrainingJobStatus"] == "Completed", done.get("FailureReason")
    peers = json.loads(_tar_members(s3, done["ModelArtifacts"]["S3ModelArtifacts"])["peers.json"])
    data_hosts = [h for h, c in _hosts(endpoint, job).items() if c["current_group_name"] == "data"]
    assert peers["got"] == {h: h for h in data_hosts}
    addresses = peers["addresses"]
    assert sorted(addresses) == ["algo-1", "algo-2", "algo-3"]
    assert len(set(addresses.values())) == 3
    assert all(re.fullmatch(r"127\.0\.\d+\.\d+", a) and a != "127.0.0.1" for a in addresses.values())


def test_unsafe_source_tarball_fails_the_job_before_any_host_runs(endpoint: LocalEndpoint, sm: Any, s3: Any) -> None:
    job = unique("unsafe")
    evil = tarfile.TarInfo("../evil.py")
    evil.size = 1
    key = f"{job}/source/sourcedir.tar.gz"
    s3.put_object(Bucket=BUCKET, Key=key, Body=tarball({"train.py": "print('hi')\n"}, [evil]))
    sm.create_training_job(**request(job, f"s3://{BUCKET}/{key}"))
    done = wait(sm, job)
    assert done["TrainingJobStatus"] == "Failed"
    assert done["FailureReason"] == (
        f"ClientError: The source tarball s3://{BUCKET}/{key} was refused: member '../evil.py' would be extracted "
        "outside the code directory. No host was started."
    )
    assert [t["Status"] for t in done["SecondaryStatusTransitions"]] == ["Starting", "Downloading", "Failed"]
    assert not (endpoint.job_dir(job) / "hosts.json").exists()
    assert not list(endpoint.workdir.rglob("evil.py"))


def test_job_without_entry_point_fails_with_a_clear_reason(sm: Any, s3: Any) -> None:
    job = unique("noprogram")
    body = request(job, put_source(s3, job, "print('x')\n"))
    del body["HyperParameters"]["sagemaker_program"]
    sm.create_training_job(**body)
    done = wait(sm, job)
    assert done["TrainingJobStatus"] == "Failed"
    assert "sagemaker_program" in done["FailureReason"]
    missing = unique("nofile")
    sm.create_training_job(**request(missing, put_source(s3, missing, "print('x')\n"), program="other.py"))
    assert "The entry point other.py is not in the source tarball" in wait(sm, missing)["FailureReason"]


def test_missing_channel_data_fails_the_job(sm: Any, s3: Any) -> None:
    job = unique("nodata")
    channels = [channel("train", f"s3://{BUCKET}/{job}/nothing-here")]
    sm.create_training_job(**request(job, put_source(s3, job, "print('x')\n"), channels=channels))
    reason = wait(sm, job)["FailureReason"]
    assert reason.startswith("ClientError: Channel train: Data download failed: No S3 objects found under S3 URL")


def test_model_upload_failure_fails_the_job(sm: Any, s3: Any) -> None:
    job = unique("noupload")
    body = request(job, put_source(s3, job, WORKER), groups=(("only", "ml.m5.large", 1),))
    body["OutputDataConfig"]["S3OutputPath"] = "s3://no-such-output-bucket/out"
    sm.create_training_job(**body)
    done = wait(sm, job)
    assert done["TrainingJobStatus"] == "Failed"
    assert [t["Status"] for t in done["SecondaryStatusTransitions"]][-2:] == ["Uploading", "Failed"]
    assert done["FailureReason"].startswith(
        f"ClientError: Could not upload the model to s3://no-such-output-bucket/out/{job}/output/model.tar.gz"
    )
    assert "NoSuchBucket" in done["FailureReason"]
