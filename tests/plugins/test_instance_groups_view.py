"""The "Instance groups" view over HTTP: a summary task run by dag.test() into a real metadata DB, read back
through the Airflow 3 api-server app with the plugin mounted, Airflow's own authentication in front."""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import boto3
import pytest
from moto import mock_aws
from support.page_layout import CHROMIUM_FLAGS, find_chromium, nesting_problems
from support.png import read_png
from support.verdict_jobs import data_bound_with_jitter, put_job

from airflow_hetero._compat import AIRFLOW_V_3

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not AIRFLOW_V_3, reason="Airflow 3's api-server plugin (2.11: test_instance_groups_page)"),
]

DAG_ID, TASK_ID, JOB = "hetero_view", "summarize", "retrain-view"
#: JWT signing key of the test api-server (64 bytes: what HS512 wants).
SECRET = "instance-groups-view-test-" + "k" * 38
MESSAGE = (
    "train_group GPUs 38% busy while data_group CPUs are at 96%: data_group is the bottleneck; "
    "try 4 data_group instances"
)
#: Test prices per instance-hour (given as overrides, labelled "prices=" on the page; not AWS's).
PRICES = {"ml.c5.18xlarge": 3.672, "ml.p4d.24xlarge": 37.688}
#: How long ``airflow db migrate`` may take (a fresh SQLite DB, on a loaded 2-core machine).
MIGRATE_TIMEOUT = 300
DAG_FILE = textwrap.dedent(
    f'''
    """The summary task whose XCom the view reads."""
    import pendulum

    from airflow.sdk import DAG
    from airflow_hetero.operators import HeteroLogSummaryOperator

    with DAG("{DAG_ID}", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
        HeteroLogSummaryOperator(
            task_id="{TASK_ID}",
            job_name="{JOB}",
            aws_conn_id=None,
            region_name="us-east-1",
            prices={PRICES!r},  # moto has no Price List: the view's costs come from these
            use_pricing_api=False,
        )
    '''
)


@dataclass
class Run:
    run_id: str
    summary: dict[str, Any]
    verdict: Any
    link: Any


@pytest.fixture(scope="module")
def run() -> Iterator[Run]:
    """Migrate the test DB, run the summary DAG once under dag.test() against moto."""
    subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"],
        check=True,
        timeout=MIGRATE_TIMEOUT,
        capture_output=True,
        env=os.environ.copy(),
    )
    from airflow.configuration import conf

    from airflow_hetero.hooks.training import HeteroTrainingHook

    folder = Path(conf.get("core", "dags_folder"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "hetero_view_dag.py"
    path.write_text(DAG_FILE)
    patch = pytest.MonkeyPatch()
    try:
        with mock_aws():
            aws = {f"{k}_client": boto3.client(k, region_name="us-east-1") for k in ("sagemaker", "logs", "cloudwatch")}
            describe = put_job(aws, JOB, data_bound_with_jitter())
            patch.setattr(HeteroTrainingHook, "conn", property(lambda self: describe))
            spec = importlib.util.spec_from_file_location("hetero_view_dag", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            dag_run = module.dag.test()
        (ti,) = dag_run.get_task_instances()
        assert ti.state == "success"
        yield Run(
            dag_run.run_id,
            ti.xcom_pull(task_ids=TASK_ID),
            ti.xcom_pull(task_ids=TASK_ID, key="verdict"),
            ti.xcom_pull(task_ids=TASK_ID, key="_link_InstanceGroupsLink"),
        )
    finally:
        patch.undo()
        path.unlink()


@pytest.fixture(scope="module")
def client(run: Run) -> Iterator[Any]:
    """The api-server app (core APIs, plugins, auth manager) and an admin's token."""
    from airflow.api_fastapi.app import create_app, get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from fastapi.testclient import TestClient

    patch = pytest.MonkeyPatch()
    patch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", SECRET)
    app = create_app("core")
    token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="admin", role="admin"))
    with TestClient(app) as test_client:
        test_client.token = token
        yield test_client
    patch.undo()


def page_url(run_id: str, task_id: str = TASK_ID, map_index: str = "-1") -> str:
    """The page's address as the UI builds it (each value URL-encoded)."""
    query = "&".join(
        f"{k}={quote(v, safe='')}" for k, v in (("dag_id", DAG_ID), ("run_id", run_id), ("task_id", task_id))
    )
    return f"/hetero/instance-groups?{query}&map_index={map_index}"


def test_the_run_left_summary_verdict_and_link_in_xcom(run: Run) -> None:
    assert run.summary["verdict"]["message"] == MESSAGE
    assert run.verdict == run.summary["verdict"]
    assert run.link == page_url(run.run_id)
    assert set(run.summary["groups"]["train_group"]["series"]) >= {"gpu", "gpu_memory", "cpu"}


def test_the_plugin_is_registered_with_the_api_server(client: Any) -> None:
    answer = client.get("/api/v2/plugins", headers={"Authorization": f"Bearer {client.token}"})
    assert answer.status_code == 200
    (plugin,) = [p for p in answer.json()["plugins"] if p["name"] == "airflow_hetero"]
    (view,) = plugin["external_views"]
    assert view["destination"] == "task_instance"
    assert view["href"].startswith("/hetero/instance-groups?dag_id={DAG_ID}&run_id={RUN_ID}&task_id={TASK_ID}")
    assert plugin["fastapi_apps"][0]["url_prefix"] == "/hetero"


def test_the_page_draws_the_groups_and_the_verdict(client: Any, run: Run) -> None:
    answer = client.get(page_url(run.run_id), headers={"Authorization": f"Bearer {client.token}"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/html")
    assert answer.headers["content-security-policy"].startswith("default-src 'none'")
    html = answer.text
    assert MESSAGE in html
    assert html.count("<svg") == 2  # one chart per group
    assert nesting_problems(html) == []  # every element closed in order, as served
    assert "<script" not in html and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html
    assert "data_group" in html and "train_group" in html and "2 x ml.c5.18xlarge" in html


def test_the_ui_iframe_way_cookie_and_an_unfilled_map_index(client: Any, run: Run) -> None:
    client.cookies.set("_token", client.token)
    try:
        answer = client.get(page_url(run.run_id, map_index="{MAP_INDEX}"))
    finally:
        client.cookies.clear()
    assert answer.status_code == 200 and MESSAGE in answer.text


def test_the_extra_link_opens_the_same_page(client: Any, run: Run) -> None:
    answer = client.get(run.link, headers={"Authorization": f"Bearer {client.token}"})
    assert answer.status_code == 200 and MESSAGE in answer.text


def test_access_is_airflows(client: Any, run: Run) -> None:
    assert client.get(page_url(run.run_id)).status_code == 401
    forged = client.get(page_url(run.run_id), headers={"Authorization": "Bearer not-a-token"})
    assert forged.status_code in (401, 403)
    assert MESSAGE not in forged.text


def test_other_task_instances_and_bad_queries(client: Any, run: Run) -> None:
    auth = {"Authorization": f"Bearer {client.token}"}
    other = client.get(page_url(run.run_id, task_id="train"), headers=auth)
    assert other.status_code == 200 and "has no instance-group summary" in other.text
    missing = client.get(page_url("no-such-run"), headers=auth)
    assert missing.status_code == 200 and "has no instance-group summary" in missing.text
    assert client.get(f"/hetero/instance-groups?dag_id={DAG_ID}&task_id={TASK_ID}", headers=auth).status_code == 422


DOCS_SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "img" / "instance-groups.png"
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(url: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} did not answer within {seconds} s")
        time.sleep(0.5)


def colour_count(rows: list[list[tuple[int, int, int]]], colour: str, tolerance: int = 10) -> int:
    want = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return sum(1 for row in rows for px in row if all(abs(a - b) <= tolerance for a, b in zip(px, want, strict=True)))


def test_screenshot_of_the_view_in_the_airflow_ui(run: Run, tmp_path: Path) -> None:
    """The task instance page of the real Airflow UI (api-server over loopback) with the plugin's tab open,
    taken by headless Chromium; the charts' colours must be on it. HETERO_UPDATE_SCREENSHOT=1 copies it
    to docs/img/instance-groups.png."""
    chromium = find_chromium()
    port = free_port()
    env = {
        **os.environ,
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        "AIRFLOW__API_AUTH__JWT_SECRET": SECRET,
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
    }
    log = (tmp_path / "api-server.log").open("w")
    command = [sys.executable, "-m", "uvicorn", "--factory", "airflow.api_fastapi.app:create_app"]
    server = subprocess.Popen(
        [*command, "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    shot = tmp_path / "instance-groups.png"
    try:
        wait_for(f"http://127.0.0.1:{port}/api/v2/monitor/health", 120)
        url = (
            f"http://127.0.0.1:{port}/dags/{DAG_ID}/runs/{quote(run.run_id, safe='')}/tasks/{TASK_ID}"
            "/plugin/hetero-instance-groups"
        )
        flags = [f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,1500", "--virtual-time-budget=30000"]
        subprocess.run(
            [chromium, *CHROMIUM_FLAGS, *flags, f"--screenshot={shot}", url],
            check=True,
            capture_output=True,
            timeout=240,
        )
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
    assert server.returncode is not None
    width, height, rows = read_png(shot)
    assert (width, height) == (1400, 1500)  # tall enough for the verdict, the cost and both charts
    # the charts (drawn by the plugin, inside Airflow's page): CPU blue, GPU red, memory green, GPU memory
    # orange; each line is some 500+ pixels of its exact colour (the verdict's red border is another red)
    for colour in ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e"):
        assert colour_count(rows, colour) > 300, (colour, (tmp_path / "api-server.log").read_text()[-3000:])
    if os.environ.get("HETERO_UPDATE_SCREENSHOT"):
        DOCS_SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, DOCS_SCREENSHOT)
