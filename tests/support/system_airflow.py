"""A production-shaped Airflow 3 for the system test: PostgreSQL, Redis, CeleryExecutor, the offline endpoint.

Each component is a process of its own (:class:`support.process_group.Processes`): PostgreSQL and
Redis on 127.0.0.1 and free ports, ``airflow-hetero local serve``, then the scheduler, dag-processor,
triggerer, api-server and two Celery workers, all from the venv this test runs in (the package's
installed wheel: ``make system``), with traces exported to a receiver of the test and the OpenLineage listener
writing to a file. :class:`Stack` knows the addresses, the environment and the REST token; :func:`start_stack`
brings it all up, :meth:`Stack.stop` takes it all down.
"""

from __future__ import annotations

import glob
import json
import os
import pwd
import re
import secrets
import shutil
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.otlp_receiver import OtlpReceiver
from support.process_group import Processes, wait_until

BIN = Path(sys.executable).parent
CONN_ID = "aws_system"
REGION = "us-east-1"
#: The order in which :meth:`Stack.stop` stops the components: Airflow first, the services it needs last.
STOP_ORDER = ("scheduler", "triggerer", "worker-1", "worker-2", "dag-processor", "api-server", "endpoint")
SERVICES = ("redis", "postgres")
#: The OpenLineage namespace of the stack's jobs.
LINEAGE_NAMESPACE = "hetero-system"
#: The states a DAG run ends in.
DONE = ("success", "failed")
#: How long a setup command may take on a loaded machine: initdb, a psql statement.
COMMAND_TIMEOUT = 120
#: How long ``airflow db migrate`` may take on a fresh Postgres database.
MIGRATE_TIMEOUT = 600
#: Scheduler and triggerer thresholds, shortened so a lost worker or triggerer is noticed in seconds.
FAST = {
    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "20",
    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "2",
    "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
    "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "2",
    "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "10",
    "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
}


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def postgres_bin(name: str) -> str:
    """A PostgreSQL server program: on PATH, or where Debian's package keeps it."""
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), None)
    if not found:
        raise AssertionError(f"{name} not found: install PostgreSQL (apt-get install -y postgresql; .ci/run does)")
    return found


def service_user() -> str | None:
    """PostgreSQL refuses to run as root: as root, run it as Debian's ``postgres`` user."""
    return "postgres" if os.geteuid() == 0 else None


@dataclass
class Stack:
    """Addresses, environment and processes of one running system."""

    root: Path
    procs: Processes
    env: dict[str, str] = field(default_factory=dict)
    api_url: str = ""
    endpoint_url: str = ""
    token: str = ""
    dags: Path = field(default_factory=Path)
    #: The OTLP receiver every component exports its spans to (``[traces] otel_on``).
    traces: OtlpReceiver | None = None

    @property
    def lineage(self) -> Path:
        """The file every component's OpenLineage listener appends its events to (:func:`lineage_env`)."""
        return self.root / "openlineage.jsonl"

    def airflow(self, name: str, *args: str) -> None:
        """Start ``airflow ARGS`` as the component ``name``."""
        self.procs.start(name, [str(BIN / "airflow"), *args], self.env, cwd=self.root)

    def start_worker(self, index: int) -> None:
        """Celery worker ``index``: its own Celery host name and log-server port."""
        env = {**self.env, "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port())}
        argv = [str(BIN / "airflow"), "celery", "worker", "--concurrency", "8", "-H", f"worker{index}@%h"]
        self.procs.start(f"worker-{index}", argv, env, cwd=self.root)
        wait_until(
            f"celery worker {index} ready",
            lambda: "ready." in self.procs.started[f"worker-{index}"].tail(100_000),
            120,
            detail=self.procs.started[f"worker-{index}"].tail,
        )

    def trigger(self, dag_id: str, run_id: str, **conf: Any) -> None:
        """Start a run of ``dag_id`` through the REST API (no logical date, as a manual run)."""
        self.rest("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"dag_run_id": run_id, "logical_date": None, "conf": conf})

    def task_instance(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
        """The task instance as the REST API shows it."""
        answer: dict[str, Any] = self.rest("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}")
        return answer

    def states(self, dag_id: str, runs: list[str], task_id: str = "train") -> list[str]:
        """The state of ``task_id`` in each of ``runs``."""
        return [str(self.task_instance(dag_id, run, task_id)["state"]) for run in runs]

    def start_triggerer(self) -> None:
        """A triggerer (after a kill: a new one, with its own log-server port)."""
        env = {**self.env, "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port())}
        self.procs.start("triggerer", [str(BIN / "airflow"), "triggerer"], env, cwd=self.root)

    def rest(self, method: str, path: str, body: Any = None, timeout: float = 30) -> Any:
        """Call the REST API (``/api/v2...``) with the admin token; the decoded JSON answer."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.api_url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                raw = answer.read()
        except urllib.error.HTTPError as error:
            raise AssertionError(f"{method} {path}: HTTP {error.code} {error.read()[:2000]!r}") from error
        return json.loads(raw) if raw else None

    def get_text(self, path: str) -> tuple[int, str, dict[str, str]]:
        """GET a page of the api-server with the token: (status, text, headers)."""
        request = urllib.request.Request(self.api_url + path)
        request.add_header("Authorization", f"Bearer {self.token}")
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, answer.read().decode(), dict(answer.headers)

    def health(self) -> dict[str, Any]:
        """``/api/v2/monitor/health`` (no token needed)."""
        with urllib.request.urlopen(self.api_url + "/api/v2/monitor/health", timeout=10) as answer:
            result: dict[str, Any] = json.loads(answer.read())
        return result

    def healthy(self, *components: str) -> bool:
        """Whether each of ``components`` (scheduler, triggerer, dag_processor) reports healthy."""
        try:
            health = self.health()
        except OSError:
            return False
        return all((health.get(c) or {}).get("status") == "healthy" for c in components)

    def logs(self) -> str:
        """The end of every component's log, for a failure message."""
        return "\n".join(f"--- {n} ---\n{s.tail(1500)}" for n, s in self.procs.started.items())

    def stop(self) -> None:
        """Stop Airflow, then the endpoint, then Redis and PostgreSQL, then the trace receiver; its spans are
        left in ``logs/spans.json``."""
        self.procs.stop_all(order=(*STOP_ORDER, *SERVICES))
        if self.traces is not None:
            self.traces.stop()
            self.traces.save(self.procs.logs / "spans.json")


def run_path(dag_id: str, run_id: str) -> str:
    """The REST path of a DAG run."""
    return f"/api/v2/dags/{dag_id}/dagRuns/{run_id}"


def start_postgres(stack: Stack) -> str:
    """initdb in a fresh directory, serve it on 127.0.0.1 and a free port; the SQLAlchemy URL."""
    user = service_user()
    data = stack.root / "postgres"
    data.mkdir()
    if user:  # the service user must reach its directory inside the test's own
        entry = pwd.getpwnam(user)
        stack.root.chmod(0o711)
        os.chown(data, entry.pw_uid, entry.pw_gid)
    run_as = {"user": user} if user else {}
    subprocess.run(
        [postgres_bin("initdb"), "-D", str(data / "db"), "-U", "airflow", "--auth=trust", "-E", "UTF8", "--no-sync"],
        check=True,
        capture_output=True,
        cwd=data,
        timeout=COMMAND_TIMEOUT,
        **run_as,
    )
    port = free_port()
    settings = ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
    argv = [postgres_bin("postgres"), "-D", str(data / "db"), "-h", "127.0.0.1", "-p", str(port), "-k", str(data)]
    stack.procs.start("postgres", [*argv, *settings, "-c", "max_connections=300"], {}, cwd=data, user=user)
    wait_until(
        "PostgreSQL accepting connections",
        lambda: _port_open(port) and "ready to accept connections" in stack.procs.started["postgres"].tail(),
        60,
        0.3,
        detail=stack.procs.started["postgres"].tail,
    )
    psql = [shutil.which("psql") or "psql", "-h", "127.0.0.1", "-p", str(port), "-U", "airflow", "-d", "postgres"]
    subprocess.run(
        [*psql, "-c", "CREATE DATABASE airflow"],
        check=True,
        capture_output=True,
        timeout=COMMAND_TIMEOUT,
    )
    return f"airflow@127.0.0.1:{port}/airflow"


def start_redis(stack: Stack) -> str:
    """redis-server on 127.0.0.1 and a free port, nothing saved to disk; the broker URL."""
    found = shutil.which("redis-server")
    if not found:
        raise AssertionError("redis-server not found: apt-get install -y redis-server (.ci/run does)")
    port = free_port()
    argv = [found, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"]
    stack.procs.start("redis", [*argv, "--dir", str(stack.root)], {}, cwd=stack.root)
    wait_until("Redis listening", lambda: _port_open(port), 30, 0.2, detail=stack.procs.started["redis"].tail)
    return f"redis://127.0.0.1:{port}/0"


def start_endpoint(stack: Stack, capacity: dict[str, int] | None = None) -> None:
    """``airflow-hetero local serve`` (the installed package's command) on a free port; ``capacity``: the
    instances of each type named that can run at once (``--capacity``; the others unlimited)."""
    port = free_port()
    workdir = stack.root / "endpoint"
    argv = [str(BIN / "airflow-hetero"), "local", "serve", "--port", str(port), "--workdir", str(workdir)]
    if capacity:
        argv += ["--capacity", ",".join(f"{kind}={count}" for kind, count in capacity.items())]
    started = stack.procs.start("endpoint", [*argv, "--stop-grace", "2"], stack.env, cwd=stack.root)
    wait_until("the offline endpoint's banner", lambda: "Press Ctrl-C" in started.tail(), 60, 0.3, detail=started.tail)
    found = re.search(r"listening on (http://\S+)", started.tail())
    assert found, started.tail()
    stack.endpoint_url = found.group(1)


def airflow_env(stack: Stack, database: str, broker: str, api_port: int) -> dict[str, str]:
    """The configuration every Airflow component shares (only environment variables, no airflow.cfg edits)."""
    home = stack.root / "airflow"
    connection = {
        "conn_type": "aws",
        "login": "testing",
        "password": "testing",
        "extra": {"endpoint_url": stack.endpoint_url, "region_name": REGION},
    }
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "AWS_"))}
    return {
        **keep,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(stack.dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{api_port}/execution/",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"postgresql+psycopg2://{database}",
        "AIRFLOW__CELERY__BROKER_URL": broker,
        "AIRFLOW__CELERY__RESULT_BACKEND": f"db+postgresql://{database}",
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{api_port}",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(api_port),
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
        **FAST,
        f"AIRFLOW_CONN_{CONN_ID.upper()}": json.dumps(connection),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AIRFLOW_HETERO_CACHE_DIR": str(stack.root / "hetero-cache"),
        "PYTHONUNBUFFERED": "1",
        **trace_env(stack),
        **lineage_env(stack),
    }


def trace_env(stack: Stack) -> dict[str, str]:
    """``[traces] otel_on`` with OTLP/HTTP to the stack's receiver (none: tracing stays off)."""
    if stack.traces is None:
        return {}
    return {
        "AIRFLOW__TRACES__OTEL_ON": "True",
        "OTEL_TRACES_EXPORTER": "otlp_proto_http",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": stack.traces.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "500",  # the long-lived components export within half a second
    }


def lineage_env(stack: Stack) -> dict[str, str]:
    """The OpenLineage provider's listener on, in every component: its file transport appends each event, one JSON
    line, to :attr:`Stack.lineage` (docs/lineage.md#turning-it-on)."""
    transport = {"type": "file", "log_file_path": str(stack.lineage), "append": True}
    return {
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": LINEAGE_NAMESPACE,
    }


def start_stack(root: Path, dags: Path, capacity: dict[str, int] | None = None) -> Stack:
    """PostgreSQL, Redis, the endpoint (with ``capacity``: :func:`start_endpoint`), ``airflow db migrate``, then
    every Airflow component; healthy."""
    stack = Stack(root=root, procs=Processes(root / "logs"), dags=dags)
    try:
        database, broker = start_postgres(stack), start_redis(stack)
        stack.env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "AWS_"))}
        start_endpoint(stack, capacity)
        stack.traces = OtlpReceiver()
        api_port = free_port()
        stack.env = airflow_env(stack, database, broker, api_port)
        stack.api_url = f"http://127.0.0.1:{api_port}"
        migrate = subprocess.run(
            [str(BIN / "airflow"), "db", "migrate"],
            env=stack.env,
            cwd=root,
            capture_output=True,
            text=True,
            check=False,
            timeout=MIGRATE_TIMEOUT,
        )
        assert migrate.returncode == 0, migrate.stdout[-3000:] + migrate.stderr[-3000:]
        stack.airflow("api-server", "api-server", "--host", "127.0.0.1", "--port", str(api_port))
        stack.airflow("scheduler", "scheduler")
        stack.airflow("dag-processor", "dag-processor")
        stack.start_triggerer()
        stack.start_worker(1)
        stack.start_worker(2)
        wait_until(
            "scheduler, triggerer and dag-processor healthy",
            lambda: stack.healthy("metadatabase", "scheduler", "triggerer", "dag_processor"),
            180,
            detail=stack.logs,
        )
        with urllib.request.urlopen(stack.api_url + "/auth/token", timeout=30) as answer:
            stack.token = json.loads(answer.read())["access_token"]
    except BaseException:
        stack.stop()
        raise
    return stack


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def wait_for_state(stack: Stack, path: str, states: tuple[str, ...], timeout: float) -> dict[str, Any]:
    """Poll a REST resource (a DAG run or task instance) until its ``state`` is one of ``states``."""
    seen: list[str] = []

    def check() -> dict[str, Any] | None:
        answer: dict[str, Any] = stack.rest("GET", path)
        seen.append(str(answer.get("state")))
        return answer if answer.get("state") in states else None

    return wait_until(f"{path} in {states} (seen {seen[-5:]})", check, timeout, detail=stack.logs)
