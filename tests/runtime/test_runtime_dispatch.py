"""airflow_hetero.runtime: marker, group dispatch, host addresses, import hygiene, docs example."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from airflow_hetero import runtime
from airflow_hetero.runtime import (
    GroupDispatchError,
    HostLookupError,
    RuntimeConfigError,
    RuntimeEnvironment,
    format_marker,
    parse_marker,
)

ROOT = Path(__file__).resolve().parents[2]
#: How long a test's own socket may wait for its peer (loopback, on a loaded machine).
ACCEPT_TIMEOUT = 30.0
GROUPS = [
    {"instance_group_name": "data_group", "instance_type": "ml.c5.18xlarge", "hosts": ["algo-2", "algo-3"]},
    {"instance_group_name": "dnn_group", "instance_type": "ml.p4d.24xlarge", "hosts": ["algo-1"]},
]


def host_env(base: Path, host: str, hps: dict[str, Any] | None = None) -> RuntimeEnvironment:
    """Write one host's SageMaker config under ``base`` and load it."""
    mine = next(g for g in GROUPS if host in g["hosts"])
    config = base / "input" / "config"
    config.mkdir(parents=True, exist_ok=True)
    rc = {
        "current_host": host,
        "current_instance_type": mine["instance_type"],
        "current_group_name": mine["instance_group_name"],
        "hosts": ["algo-1", "algo-2", "algo-3"],
        "instance_groups": GROUPS,
    }
    (config / "resourceconfig.json").write_text(json.dumps(rc))
    (config / "hyperparameters.json").write_text(
        json.dumps({k: json.dumps(v) for k, v in (hps or {}).items()})
    )
    return RuntimeEnvironment.load(base)


@pytest.fixture
def fresh_marker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let this test print the once-per-process marker again."""
    monkeypatch.setattr(runtime.dispatch, "_marker_done", threading.Event())


# -- marker -------------------------------------------------------------------------------------


def test_marker_format_is_the_contract_line() -> None:
    line = format_marker("algo-2", "data_group", "ml.c5.18xlarge")
    assert line == "[airflow-hetero] host=algo-2 group=data_group instance_type=ml.c5.18xlarge"
    assert parse_marker(line) == ("algo-2", "data_group")


@pytest.mark.parametrize(
    ("host", "group"),
    [
        ("algo-1", "dnn_group"),
        ("algo-12", "my group"),
        ("algo-3", "a=b%c"),
        ("algo-4", "grüppe"),
        ("h", "g\tx"),
    ],
)
def test_marker_round_trip_with_awkward_names(host: str, group: str) -> None:
    line = format_marker(host, group, "ml.m5.large")
    assert len(line.split(" ")) == 4, line
    assert parse_marker(line) == (host, group)
    assert parse_marker(line + "\r\n") == (host, group)


@pytest.mark.parametrize("bad", ["", None, 3])
def test_marker_rejects_empty_or_non_string_values(bad: Any) -> None:
    with pytest.raises(ValueError, match="group must be a non-empty string"):
        format_marker("algo-1", bad, "ml.m5.large")


@pytest.mark.parametrize(
    "line",
    [
        "[1,0]<stdout>:[airflow-hetero] host=algo-5 group=dnn_group instance_type=ml.p4d.24xlarge",
        "2026-11-30 03:08:00 [airflow-hetero] host=algo-5 group=dnn_group instance_type=ml.p4d.24xlarge",
        "[airflow-hetero] host=algo-5 group=dnn_group instance_type=ml.p4d.24xlarge   ",
    ],
)
def test_marker_found_after_prefixes(line: str) -> None:
    assert parse_marker(line) == ("algo-5", "dnn_group")


@pytest.mark.parametrize(
    "line",
    [
        "",
        "hello world",
        "SM_CURRENT_HOST=algo-2",
        "SM_CURRENT_INSTANCE_GROUP=data_group",
        "[airflow-hetero]",
        "[airflow-hetero] host=algo-2 group=data_group",
        "[airflow-hetero] host=algo-2 group=data_group instance_type=",
        "[airflow-hetero] host= group=data_group instance_type=ml.c5.xlarge",
        "[airflow-hetero] group=data_group host=algo-2 instance_type=ml.c5.xlarge",
        "[airflow-hetero]  host=algo-2 group=data_group instance_type=ml.c5.xlarge",
        "[airflow-hetero] host=algo-2  group=data_group instance_type=ml.c5.xlarge",
        "[airflow-hetero] host=algo-2 group=data_group instance_type=ml.c5.xlarge extra=1",
        "[airflow-hetero] host=algo-2 group=data group instance_type=ml.c5.xlarge",
        "[airflow-hetero] host=algo-2 group=a=b instance_type=ml.c5.xlarge",
        "[airflow_hetero] host=algo-2 group=data_group instance_type=ml.c5.xlarge",
        "airflow-hetero host=algo-2 group=data_group instance_type=ml.c5.xlarge",
        "x[airflow-hetero] host=algo-2 group=data_group instance_type=ml.c5.xlarge",
        "[AIRFLOW-HETERO] host=algo-2 group=data_group instance_type=ml.c5.xlarge",
        "[airflow-hetero] host=algo-2 group=data_group instance_type=ml.c5.xlarge trailing",
    ],
)
def test_parse_marker_rejects_junk_and_near_misses(line: str) -> None:
    assert parse_marker(line) is None


def test_log_marker_prints_once(
    tmp_path: Path, fresh_marker: None, capsys: pytest.CaptureFixture[str]
) -> None:
    env = host_env(tmp_path, "algo-3")
    assert runtime.log_marker(env) == env.marker()
    runtime.log_marker(env)
    assert (
        capsys.readouterr().out
        == "[airflow-hetero] host=algo-3 group=data_group instance_type=ml.c5.18xlarge\n"
    )


def test_log_marker_is_flushed_before_a_hard_exit(tmp_path: Path) -> None:
    """os._exit skips buffer flushing: the line only arrives if log_marker flushed it."""
    host_env(tmp_path, "algo-1")
    code = "import os; from airflow_hetero import runtime; runtime.log_marker(); os._exit(0)"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "SAGEMAKER_BASE_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "[airflow-hetero] host=algo-1 group=dnn_group instance_type=ml.p4d.24xlarge\n"


# -- run_by_group -------------------------------------------------------------------------------


def test_run_by_group_calls_the_current_groups_function(
    tmp_path: Path, fresh_marker: None, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[str] = []

    def serve() -> str:
        calls.append("serve")
        return "served"

    def train() -> str:
        calls.append("train")
        return "trained"

    env = host_env(tmp_path, "algo-2")
    assert runtime.run_by_group({"data_group": serve, "dnn_group": train}, env=env) == "served"
    assert calls == ["serve"]
    assert parse_marker(capsys.readouterr().out.splitlines()[0]) == ("algo-2", "data_group")


def test_run_by_group_uses_the_loaded_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_marker: None
) -> None:
    host_env(tmp_path, "algo-1")
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))
    assert runtime.run_by_group({"data_group": lambda: 1, "dnn_group": lambda: 2}) == 2


def test_run_by_group_without_a_function_for_the_group(
    tmp_path: Path, fresh_marker: None, capsys: pytest.CaptureFixture[str]
) -> None:
    env = host_env(tmp_path, "algo-1")
    with pytest.raises(GroupDispatchError) as err:
        runtime.run_by_group({"data_group": lambda: None, "dnn_grp": lambda: None}, env=env)
    msg = str(err.value)
    assert "'dnn_group'" in msg and "algo-1" in msg
    assert "given data_group, dnn_grp" in msg
    assert "instance groups are data_group, dnn_group" in msg
    assert parse_marker(capsys.readouterr().out.strip()) == ("algo-1", "dnn_group"), "marker comes first"


def test_run_by_group_with_no_functions(tmp_path: Path, fresh_marker: None) -> None:
    with pytest.raises(GroupDispatchError, match=r"given \(none\)"):
        runtime.run_by_group({}, env=host_env(tmp_path, "algo-1"))


def test_run_by_group_rejects_non_callables(tmp_path: Path, fresh_marker: None) -> None:
    with pytest.raises(TypeError, match="'data_group' is not callable"):
        handlers: dict[str, Any] = {"data_group": "serve", "dnn_group": lambda: None}
        runtime.run_by_group(handlers, env=host_env(tmp_path, "algo-1"))


def test_run_by_group_propagates_the_functions_error(tmp_path: Path, fresh_marker: None) -> None:
    def boom() -> None:
        raise ValueError("bad batch")

    with pytest.raises(ValueError, match="bad batch"):
        runtime.run_by_group({"data_group": boom}, env=host_env(tmp_path, "algo-3"))


# -- host addresses -----------------------------------------------------------------------------

ADDRS = {"algo-1": "127.0.1.1", "algo-2": "127.0.1.2", "algo-3": "127.0.1.3"}


def test_host_address_from_the_offline_map(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_HETERO_HOST_ADDRESSES", json.dumps(ADDRS))
    monkeypatch.setattr(socket, "gethostbyname", lambda host: pytest.fail("DNS must not be used"))
    assert runtime.host_address("algo-2") == "127.0.1.2"
    with pytest.raises(HostLookupError, match=r"'algo-9'.*known hosts: algo-1, algo-2, algo-3"):
        runtime.host_address("algo-9")


def test_listen_address_locally_and_on_sagemaker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = host_env(tmp_path, "algo-3")
    monkeypatch.delenv("AIRFLOW_HETERO_HOST_ADDRESSES", raising=False)
    assert runtime.listen_address(env) == "0.0.0.0"
    monkeypatch.setenv("AIRFLOW_HETERO_HOST_ADDRESSES", json.dumps(ADDRS))
    assert runtime.listen_address(env) == "127.0.1.3"
    monkeypatch.setenv("AIRFLOW_HETERO_HOST_ADDRESSES", json.dumps({"algo-1": "127.0.1.1"}))
    with pytest.raises(HostLookupError, match="'algo-3'"):
        runtime.listen_address(env)


def test_host_address_uses_dns_without_the_map(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW_HETERO_HOST_ADDRESSES", raising=False)
    assert runtime.host_address("localhost").startswith("127.")
    monkeypatch.setattr(socket, "gethostbyname", lambda host: {"algo-4": "10.0.0.4"}[host])
    assert runtime.host_address("algo-4") == "10.0.0.4"


def test_dns_lookup_retries_until_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW_HETERO_HOST_ADDRESSES", raising=False)
    attempts: list[str] = []

    def flaky(host: str) -> str:
        attempts.append(host)
        if len(attempts) < 3:
            raise socket.gaierror(-2, "Name or service not known")
        return "10.0.0.7"

    monkeypatch.setattr(socket, "gethostbyname", flaky)
    assert runtime.host_address("algo-7", timeout=5) == "10.0.0.7"
    assert attempts == ["algo-7"] * 3

    attempts.clear()

    def unknown(host: str) -> str:
        attempts.append(host)
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(socket, "gethostbyname", unknown)
    with pytest.raises(HostLookupError, match="cannot resolve host 'algo-8'"):
        runtime.host_address("algo-8")  # timeout 0: one attempt only
    assert attempts == ["algo-8"]


@pytest.mark.parametrize("raw", ["{oops", '["algo-1"]', '{"algo-1": 1}', '{"algo-1": ""}'])
def test_malformed_address_map(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("AIRFLOW_HETERO_HOST_ADDRESSES", raw)
    with pytest.raises(RuntimeConfigError, match="AIRFLOW_HETERO_HOST_ADDRESSES"):
        runtime.host_address("algo-1")


def test_connect_waits_for_a_late_server(monkeypatch: pytest.MonkeyPatch) -> None:
    probe = socket.create_server(("127.0.1.2", 0))
    port = probe.getsockname()[1]
    probe.close()
    monkeypatch.setenv("AIRFLOW_HETERO_HOST_ADDRESSES", json.dumps(ADDRS))
    started = threading.Event()

    def late_server() -> None:
        started.wait(0.3)  # not listening yet when connect() starts
        with socket.create_server(("127.0.1.2", port)) as srv:
            srv.settimeout(ACCEPT_TIMEOUT)  # a connect() that never comes fails the thread, not the run
            conn, _ = srv.accept()
            with conn:
                conn.sendall(b"hi")

    thread = threading.Thread(target=late_server, daemon=True)
    thread.start()
    with runtime.connect("algo-2", port, timeout=10) as sock:
        assert sock.gettimeout() is None
        sock.settimeout(ACCEPT_TIMEOUT)  # the test's own read: bounded
        assert sock.recv(2) == b"hi"
    thread.join(5)


def test_connect_gives_up_after_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    probe = socket.create_server(("127.0.1.3", 0))
    port = probe.getsockname()[1]
    probe.close()
    monkeypatch.setenv("AIRFLOW_HETERO_HOST_ADDRESSES", json.dumps(ADDRS))
    with pytest.raises(TimeoutError, match=rf"algo-3 \(127\.0\.1\.3:{port}\) within 0.3s"):
        runtime.connect("algo-3", port, timeout=0.3)


# -- import hygiene -----------------------------------------------------------------------------


def test_import_pulls_in_no_airflow_boto_or_pydantic() -> None:
    code = (
        "import sys, json; import airflow_hetero.runtime; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'airflow', 'boto3', 'botocore', 'pydantic', 'aiobotocore', 'yaml', 'sagemaker_training'})))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(proc.stdout) == []


# -- the docs example, run as a three-host job --------------------------------------------------


def docs_example() -> str:
    text = (ROOT / "docs" / "runtime.md").read_text()
    match = re.search(r"<!-- example: train.py -->\n```python\n(.*?)```", text, re.S)
    assert match, "example block not found in docs/runtime.md"
    return match.group(1)


@pytest.mark.slow
def test_docs_example_runs_as_a_heterogeneous_job(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(docs_example())
    probe = socket.create_server(("127.0.1.2", 0))
    port = probe.getsockname()[1]
    probe.close()
    hps = {"data_port": port, "epochs": 4, "learning_rate": 0.2}
    procs = {}
    for host in ("algo-1", "algo-2", "algo-3"):  # the trainer starts first: connect() must wait
        base = tmp_path / host
        host_env(base, host, hps)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SM_")}
        env |= {"SAGEMAKER_BASE_DIR": str(base), "AIRFLOW_HETERO_HOST_ADDRESSES": json.dumps(ADDRS)}
        procs[host] = subprocess.Popen(
            [sys.executable, str(script)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    out = {host: proc.communicate(timeout=120)[0] for host, proc in procs.items()}
    assert {host: proc.returncode for host, proc in procs.items()} == dict.fromkeys(procs, 0), out
    assert parse_marker(out["algo-1"].splitlines()[0]) == ("algo-1", "dnn_group")
    assert parse_marker(out["algo-3"].splitlines()[0]) == ("algo-3", "data_group")
    losses = [float(x) for x in re.findall(r"^epoch=\d+ loss=([0-9.]+)$", out["algo-1"], re.M)]
    assert len(losses) == 4 and losses[-1] < losses[0] and losses[-1] < 0.05, out["algo-1"]
    model = json.loads((tmp_path / "algo-1" / "model" / "model.json").read_text())
    assert model["w"] == pytest.approx(3.0, abs=0.2) and model["b"] == pytest.approx(2.0, abs=0.2)
    assert "served 512 rows x 4 epochs" in out["algo-2"]
