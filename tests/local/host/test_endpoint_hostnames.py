"""Inside the hosts: every SM_HOSTS name resolves to that host's address, and the distribution group
gets the launcher environment, so a stock rendezvous on the master's host name works."""

from __future__ import annotations

import io
import json
import socket
import tarfile
from typing import Any

import pytest
from support.local_jobkit import put_source, request, unique, wait

from airflow_hetero.local import LocalEndpoint
from airflow_hetero.local.host import resolver, toolkit_env

pytestmark = pytest.mark.slow

SCRIPT = """
    import json, os, socket, subprocess, sys, time
    hosts = json.loads(os.environ["SM_HOSTS"])
    child = subprocess.run(
        [sys.executable, "-c", "import json, os, socket; "
         "print(json.dumps({h: socket.gethostbyname(h) for h in json.loads(os.environ['SM_HOSTS'])}))"],
        capture_output=True, text=True, check=True,
    )
    seen = {
        "getaddrinfo": {h: socket.getaddrinfo(h, 80, proto=socket.IPPROTO_TCP)[0][4][0] for h in hosts},
        "gethostbyname": {h: socket.gethostbyname(h) for h in hosts},
        "in_a_child_process": json.loads(child.stdout),
        "gethostname": socket.gethostname(),
        "launcher": {k: os.environ[k] for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
                     if k in os.environ},
    }
    if "RANK" in os.environ:  # a stock TCP rendezvous: rank 0 listens, the others dial the master by NAME
        master = json.loads(os.environ["SM_TRAINING_ENV"])["master_hostname"]
        port = int(os.environ["MASTER_PORT"])
        if os.environ["RANK"] == "0":
            server = socket.create_server((os.environ["MASTER_ADDR"], port))
            server.settimeout(30)
            got = []
            for _ in range(int(os.environ["WORLD_SIZE"]) - 1):
                conn, _ = server.accept()
                got.append(int(conn.recv(16).decode()))
                conn.close()
            seen["rendezvous"] = sorted(got)
        else:
            for _ in range(300):
                try:
                    conn = socket.create_connection((master, port), timeout=5)
                    break
                except OSError:
                    time.sleep(0.05)
            conn.sendall(os.environ["RANK"].encode())
            conn.close()
            seen["rendezvous"] = "sent"
    with open(os.path.join(os.environ["SM_MODEL_DIR"], os.environ["SM_CURRENT_HOST"] + ".json"), "w") as f:
        json.dump(seen, f)
"""


def _model(s3: Any, uri: str) -> dict[str, dict[str, Any]]:
    bucket, key = uri.removeprefix("s3://").split("/", 1)
    data = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {
            m.name.removesuffix(".json"): json.loads(tar.extractfile(m).read())  # type: ignore[union-attr]
            for m in tar.getmembers()
        }


@pytest.mark.fixed_ports(int(toolkit_env.TORCH_MASTER_PORT))  # the rendezvous listens on MASTER_PORT
@pytest.mark.parametrize("strategy", ["sagemaker_torch_distributed_enabled", "sagemaker_mpi_enabled"])
def test_host_names_resolve_and_the_distribution_group_gets_the_launcher_env(
    endpoint: LocalEndpoint, sm: Any, s3: Any, strategy: str
) -> None:
    job = unique("names")
    hps = {strategy: True, "sagemaker_distribution_instance_groups": ["dnn"]}
    body = request(
        job,
        put_source(s3, job, SCRIPT),
        groups=(("data", "ml.c5.xlarge", 1), ("dnn", "ml.p3.2xlarge", 3)),
        hyperparameters=hps,
    )
    sm.create_training_job(**body)
    done = wait(sm, job, timeout=60)
    assert done["TrainingJobStatus"] == "Completed", done.get("FailureReason")
    facts = json.loads((endpoint.job_dir(job) / "hosts.json").read_text())
    addresses = {f["host"]: f["address"] for f in facts}
    groups = {f["host"]: f["group"] for f in facts}
    seen = _model(s3, done["ModelArtifacts"]["S3ModelArtifacts"])
    assert sorted(seen) == sorted(addresses)
    dnn = [h for h in sorted(addresses, key=lambda h: int(h.split("-")[1])) if groups[h] == "dnn"]
    resource = json.loads((endpoint.job_dir(job) / "hosts" / dnn[0] / "input/config/resourceconfig.json").read_text())
    order = next(g["hosts"] for g in resource["instance_groups"] if g["instance_group_name"] == "dnn")
    for host, view in seen.items():
        assert view["getaddrinfo"] == addresses
        assert view["gethostbyname"] == addresses
        assert view["in_a_child_process"] == addresses
        assert view["gethostname"] == host
        if groups[host] == "data":
            assert view["launcher"] == {}
            continue
        assert view["launcher"] == {
            "WORLD_SIZE": "3",
            "RANK": str(order.index(host)),
            "LOCAL_RANK": "0",
            "MASTER_ADDR": addresses[order[0]],
            "MASTER_PORT": "7777",
        }
    assert seen[order[0]]["rendezvous"] == [1, 2]
    assert all(seen[h]["rendezvous"] == "sent" for h in order[1:])


def test_install_wraps_only_the_named_hosts() -> None:
    saved = (socket.getaddrinfo, socket.gethostbyname, socket.gethostbyname_ex, socket.gethostbyaddr)
    saved_name = socket.gethostname
    try:
        table = {"algo-1": "127.0.9.1", "algo-2": "127.0.9.2"}
        assert resolver.install({"AIRFLOW_HETERO_HOST_ADDRESSES": json.dumps(table), "SM_CURRENT_HOST": "algo-2"})
        assert socket.gethostbyname("ALGO-1") == "127.0.9.1"
        assert socket.gethostbyname_ex("algo-2") == ("algo-2", [], ["127.0.9.2"])
        assert socket.gethostbyaddr("127.0.9.1")[0] == "algo-1"
        assert socket.getaddrinfo(b"algo-2", 1)[0][4][0] == "127.0.9.2"
        assert socket.gethostbyname("127.0.0.1") == "127.0.0.1"  # anything else resolves as before
        assert socket.gethostname() == "algo-2"
        assert not resolver.install({})  # nothing to do without the variable
    finally:
        socket.getaddrinfo, socket.gethostbyname, socket.gethostbyname_ex, socket.gethostbyaddr = saved
        socket.gethostname = saved_name
        vars(socket).pop("_airflow_hetero_hosts", None)


def test_launcher_env_is_empty_outside_distributed_strategies() -> None:
    env = {
        "additional_framework_parameters": {"sagemaker_parameter_server_enabled": True},
        "distribution_hosts": ["algo-1"],
        "current_host": "algo-1",
        "master_hostname": "algo-1",
    }
    assert toolkit_env.launcher_env(env, {"algo-1": "127.0.1.1"}) == {}
