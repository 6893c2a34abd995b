"""The "Instance groups" and "Runs" views over HTTP: a summary task run by dag.test() into a real metadata DB (and,
for the Runs view, 32 more runs of that DAG written through Airflow's own models), read back through the Airflow
3 api-server app with the plugin mounted, Airflow's own authentication in front; one api-server over loopback
for both screenshots in headless Chromium."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import boto3
import pytest
from moto import mock_aws
from support.page_layout import nesting_problems, screenshot
from support.png import colour_count
from support.runs_db import insert_runs
from support.system_airflow import free_port
from support.verdict_jobs import data_bound_with_jitter, put_job

from airflow_hetero._compat import AIRFLOW_V_3
from airflow_hetero.plugins.page import CSP
from airflow_hetero.plugins.runs_page import CHANGE_COLOURS, GROUP_COLOURS, MARKER_COLOURS
from benchmarks.runs_data import retraining_runs

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
def run(airflow_db: None) -> Iterator[Run]:
    """On the migrated test DB, run the summary DAG once under dag.test() against moto."""
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
    view, *runs = plugin["external_views"]
    assert view["destination"] == "task_instance"
    assert view["href"].startswith("/hetero/instance-groups?dag_id={DAG_ID}&run_id={RUN_ID}&task_id={TASK_ID}")
    assert [(v["name"], v["destination"]) for v in runs] == [("Runs", "task"), ("Runs", "task_instance")]
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


@pytest.fixture(scope="module")
def api_server(run: Run, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The api-server (Airflow's UI and the plugin) over loopback, every caller an admin; its base URL."""
    port = free_port()
    env = {
        **os.environ,
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        "AIRFLOW__API_AUTH__JWT_SECRET": SECRET,
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
    }
    path = tmp_path_factory.mktemp("api-server") / "api-server.log"
    log = path.open("w")
    command = [sys.executable, "-m", "uvicorn", "--factory", "airflow.api_fastapi.app:create_app"]
    server = subprocess.Popen(
        [*command, "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(f"http://127.0.0.1:{port}/api/v2/monitor/health", 120)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
        print(path.read_text()[-3000:])  # shown when a test of the server failed


def test_screenshot_of_the_view_in_the_airflow_ui(run: Run, api_server: str, tmp_path: Path) -> None:
    """The task instance page of the real Airflow UI (api-server over loopback) with the plugin's tab open,
    taken by headless Chromium; the charts' colours must be on it. HETERO_UPDATE_SCREENSHOT=1 copies it
    to docs/img/instance-groups.png."""
    url = f"{api_server}/dags/{DAG_ID}/runs/{quote(run.run_id, safe='')}/tasks/{TASK_ID}/plugin/hetero-instance-groups"
    shot = tmp_path / "instance-groups.png"
    width, height, rows = screenshot(url, shot, (1400, 1500))
    assert (width, height) == (1400, 1500)  # tall enough for the verdict, the cost and both charts
    # the charts (drawn by the plugin, inside Airflow's page): CPU blue, GPU red, memory green, GPU memory
    # orange; each line is some 500+ pixels of its exact colour (the verdict's red border is another red)
    for colour in ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e"):
        assert colour_count(rows, colour) > 300, colour
    if os.environ.get("HETERO_UPDATE_SCREENSHOT"):
        DOCS_SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, DOCS_SCREENSHOT)


#: The Runs view's data: 32 weekly runs of the DAG's training task and its summary (benchmarks/runs_data.py).
RUNS = 32
RUNS_SCREENSHOT = DOCS_SCREENSHOT.with_name("runs.png")


@pytest.fixture(scope="module")
def runs_written(run: Run) -> None:
    """The 32 runs, all after the dag.test() run: the newest 30 are theirs, the dag.test() run on the next page."""
    insert_runs(DAG_ID, retraining_runs(RUNS, first=datetime.now(tz=UTC) + timedelta(days=1)))


def runs_url(page: int = 1, **more: str) -> str:
    return f"/hetero/runs?dag_id={DAG_ID}&task_id={TASK_ID}&page={page}" + "".join(f"&{k}={v}" for k, v in more.items())


def test_the_runs_view_pages_thirty_runs_within_a_bound_behind_airflows_access(client: Any, runs_written: None) -> None:
    """The summary task's runs (its own dag.test() run and the 32 written): 30 on the first page, read with one
    query for their XComs and rendered within a bound, the rest on the second; Airflow's access in front."""
    auth = {"Authorization": f"Bearer {client.token}"}
    started = time.monotonic()
    first = client.get(runs_url(), headers=auth)
    elapsed = time.monotonic() - started
    assert first.status_code == 200 and first.headers["content-security-policy"] == CSP
    assert elapsed < 10, elapsed  # read, model and render 30 runs (benchmarks/runs_page.py: the render alone)
    html = first.text
    assert html.count("<tr") == 31 and "runs 1 to 30, newest first" in html  # a header and 30 runs
    assert 'page=2">older runs</a>' in html and "newer runs" not in html
    assert nesting_problems(html) == [] and "<script" not in html
    assert "Runs of train" in html  # asked for the summary task, it found the training task by the job names
    second = client.get(runs_url(2), headers=auth).text
    assert second.count("<tr") == 4 and "runs 31 to 33" in second and "older runs" not in second  # 3 left
    assert "retrain-view" in second and "no result from the training task" in second  # the dag.test() run
    assert client.get(runs_url()).status_code == 401
    assert client.get(runs_url(), headers={"Authorization": "Bearer forged"}).status_code in (401, 403)
    assert client.get(runs_url(0), headers=auth).status_code == 422
    assert client.get(runs_url(limit="101"), headers=auth).status_code == 422


def test_screenshot_of_the_runs_tab_in_the_airflow_ui(api_server: str, runs_written: None, tmp_path: Path) -> None:
    """The task's page of the real Airflow UI with the plugin's Runs tab open: the stacked costs (the groups'
    colours), the markers' discs and the legend (the limit marker's colour, which no run has, is only in the
    legend). HETERO_UPDATE_SCREENSHOT=1 copies it to docs/img/runs.png."""
    url = f"{api_server}/dags/{DAG_ID}/tasks/{TASK_ID}/plugin/hetero-runs"
    shot = tmp_path / "runs.png"
    _, _, rows = screenshot(url, shot, (1400, 1100))
    for colour in GROUP_COLOURS[:2]:  # data_group, train_group: the chart's bars, hatches and the legend
        assert colour_count(rows, colour) > 2000, colour
    for kind in ("failed", "budget", "capacity", "spot", "queue"):  # the discs above the bars (and the legend)
        assert colour_count(rows, MARKER_COLOURS[kind]) > 60, kind
    assert colour_count(rows, MARKER_COLOURS["limit"]) > 20  # the legend's disc
    assert colour_count(rows, CHANGE_COLOURS["changed"]) > 100  # the dashed line where data_group went 2 -> 4
    if os.environ.get("HETERO_UPDATE_SCREENSHOT"):
        shutil.copyfile(shot, RUNS_SCREENSHOT)
