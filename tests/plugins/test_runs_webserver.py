"""The Runs page in the Airflow 2.11 webserver: the real webserver app (its plugins, FAB's access checks) over
loopback, 30 runs written through Airflow's own models, the page in headless Chromium (Airflow 3:
test_instance_groups_view.py)."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.page_layout import nesting_problems, screenshot
from support.png import colour_count
from support.runs_db import insert_runs
from support.system_airflow import free_port

from airflow_hetero._compat import AIRFLOW_V_3
from airflow_hetero.plugins.runs_page import CHANGE_COLOURS, GROUP_COLOURS, MARKER_COLOURS
from benchmarks.runs_data import retraining_runs

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(AIRFLOW_V_3, reason="Airflow 2.11's webserver (Airflow 3: test_instance_groups_view)"),
]

DAG_ID, TASK_ID = "hetero_runs_web", "train"
#: FAB lets anonymous callers in as this role: the webserver's own has_access_dag still decides.
WEBSERVER_CONFIG = 'from flask_appbuilder.const import AUTH_DB\nAUTH_TYPE = AUTH_DB\nAUTH_ROLE_PUBLIC = "{role}"\n'
DOCS_SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "img" / "runs-airflow-2.png"


def webserver_app(tmp_path: Path, role: str) -> Any:
    """Airflow 2's webserver app, anonymous callers given ``role``."""
    from airflow.www.app import create_app

    config = tmp_path / f"webserver_config_{role}.py"
    config.write_text(WEBSERVER_CONFIG.format(role=role))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AIRFLOW__WEBSERVER__CONFIG_FILE", str(config))
        return create_app(testing=True)


@pytest.fixture(scope="module")
def webserver(airflow_db: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The webserver app over loopback (anonymous callers are admins), with 30 runs of the DAG; its base URL."""
    from werkzeug.serving import make_server

    insert_runs(DAG_ID, retraining_runs(30))
    app = webserver_app(tmp_path_factory.mktemp("webserver"), "Admin")
    server = make_server("127.0.0.1", free_port(), app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="webserver", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=30)


def test_the_webserver_serves_the_runs_page_in_chromium(webserver: str, tmp_path: Path) -> None:
    """The page as the webserver answers it, drawn by Chromium: the groups' stacked costs, the markers' discs,
    the legend (the limit marker's colour, which no run has) and the right-sizing change.
    HETERO_UPDATE_SCREENSHOT=1 copies it to docs/img/runs-airflow-2.png."""
    import urllib.request

    url = f"{webserver}/hetero/runs?dag_id={DAG_ID}&task_id={TASK_ID}"
    with urllib.request.urlopen(url, timeout=60) as answer:
        html = answer.read().decode()
        assert answer.headers["Content-Security-Policy"].startswith("default-src 'none'")
    assert "Runs of train" in html and html.count("<tr") == 31 and nesting_problems(html) == []
    shot = tmp_path / "runs.png"
    _, _, rows = screenshot(url, shot, (1200, 800))
    for colour in GROUP_COLOURS[:2]:
        assert colour_count(rows, colour) > 2000, colour
    for kind in ("failed", "budget", "capacity", "spot", "queue"):
        assert colour_count(rows, MARKER_COLOURS[kind]) > 60, kind
    assert colour_count(rows, MARKER_COLOURS["limit"]) > 20  # the legend's disc
    assert colour_count(rows, CHANGE_COLOURS["changed"]) > 100
    if os.environ.get("HETERO_UPDATE_SCREENSHOT"):
        shutil.copyfile(shot, DOCS_SCREENSHOT)


def test_the_webservers_own_guard_keeps_anonymous_callers_out(airflow_db: None, tmp_path: Path) -> None:
    """With FAB's Public role (no permissions), the same route redirects to the login page: the guard is Airflow's."""
    client = webserver_app(tmp_path, "Public").test_client()
    answer = client.get(f"/hetero/runs?dag_id={DAG_ID}&task_id={TASK_ID}")
    assert answer.status_code in (302, 403) and "Runs of" not in answer.get_data(as_text=True)
