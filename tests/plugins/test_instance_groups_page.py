"""The view's page renderer, the Airflow 2.11 blueprint, and the plugin's registration (no server).

The extra link that opens the view is tested in tests/links/test_instance_groups_link.py.
"""

from __future__ import annotations

import asyncio
import re
import sys
from typing import Any

import pytest

from airflow_hetero._compat import AIRFLOW_V_3
from airflow_hetero.plugins.page import CSP, chart, render_page

#: How long a fresh interpreter may take to import what the test checks (Airflow, on a loaded 2-core machine).
IMPORT_TIMEOUT = 120


def summary(**verdict: Any) -> dict[str, Any]:
    series = {
        "start": "2026-11-30T05:00:00.000Z",
        "start_epoch": 0.0,
        "step_seconds": 60,
        "points": 4,
        "cpu": {"avg": [96, None, 94.44, 97.22], "max": [97.22, None, 95.83, 98.61]},  # per vCPU
        "memory": {"avg": [40, 41, 42, 43], "max": [40, 41, 42, 43]},
    }
    return {
        "training_job_name": "job-<1>",
        "status": "Completed",
        "groups": {
            "data_group": {
                "instance_type": "ml.c5.18xlarge",
                "instance_count": 2,
                "devices": {"cpus": 72, "gpus": 0},
                "hosts": ["algo-1"],
                "series": series,
            },
            "<b>odd</b>": {"instance_type": "ml.p3.2xlarge", "instance_count": 1, "hosts": [], "series": None},
        },
        "verdict": {
            "kind": "bottleneck",
            "message": "x <script>alert(1)</script> & more",
            "groups": {"data_group": {"busy_percent": 96.0, "state": "saturated", "cpus": 72, "resource": "cpu"}},
            "thresholds": {"busy_percent": 85, "waiting_percent": 50},
            "notes": ["n <i>"],
            "bottleneck": None,
            "suggestion": None,
            "idle_groups": [],
            "over_provisioned_groups": [],
            "instance_seconds": None,
            "waiting_instance_seconds": None,
            "waiting_share": None,
            **verdict,
        },
        "truncated": {},
    }


def test_page_escapes_everything_and_loads_nothing() -> None:
    html = render_page(summary(), where="DAG d, run r")
    assert "<script" not in html and "alert(1)</script>" not in html
    assert "x &lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in html
    assert "&lt;b&gt;odd&lt;/b&gt;" in html and "<b>odd</b>" not in html
    assert "job-&lt;1&gt;" in html and "n &lt;i&gt;" in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)  # no external resource at all
    assert html.count("<svg") == 1
    assert "No utilisation series for this group" in html
    assert "default-src 'none'" in CSP


def test_chart_draws_the_summarys_per_device_figures_and_breaks_lines_at_gaps() -> None:
    series = summary()["groups"]["data_group"]["series"]
    svg = chart(series, {"cpus": 72, "gpus": 0}, {"busy_percent": 85, "waiting_percent": 50})
    assert ">100%<" in svg  # 96 % per vCPU, as the summary holds it (not divided again): the axis stays at 100
    assert "CPU (summed)" not in svg
    assert svg.count("<circle") == 1 and svg.count("<polyline") == 2  # cpu: dot, gap, line; memory: one line
    assert svg.count('stroke-dasharray="4 3"') == 2  # busy and waiting thresholds
    summed = {**series, "cpu": {"avg": [6912, None, 6800, 7000], "max": [7000, None, 6900, 7100]}}
    unknown = chart(summed, {"cpus": None, "gpus": None}, {})  # the summary could not divide: SageMaker's sums
    assert ">7100%<" in unknown  # summed figures (7,100 at the peak): the axis grows to the next hundred
    assert "CPU (summed)" in unknown


def test_page_without_a_summary() -> None:
    for value in (None, "text", {"groups": "no"}, [1, 2]):
        html = render_page(value, where="DAG d")
        assert "has no instance-group summary" in html and "DAG d" in html


def test_blueprint_for_airflow_2_serves_the_same_page() -> None:
    from flask import Flask

    from airflow_hetero.plugins.flask_view import create_blueprint

    seen: list[tuple[str, str, str, int]] = []
    guarded: list[str] = []

    def reader(dag_id: str, run_id: str, task_id: str, map_index: int) -> Any:
        seen.append((dag_id, run_id, task_id, map_index))
        return summary() if task_id == "summarize" else None

    def guard(view: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            guarded.append("checked")
            return view(*args, **kwargs)

        return wrapped

    app = Flask(__name__)
    app.register_blueprint(create_blueprint(reader, guard))
    client = app.test_client()
    answer = client.get("/hetero/instance-groups?dag_id=d&run_id=r%2B1&task_id=summarize&map_index=3")
    assert answer.status_code == 200 and answer.headers["Content-Security-Policy"] == CSP
    assert "&lt;script&gt;" in answer.get_data(as_text=True)
    assert seen == [("d", "r+1", "summarize", 3)] and guarded == ["checked"]
    other = client.get("/hetero/instance-groups?dag_id=d&run_id=r&task_id=t&map_index={MAP_INDEX}")
    assert "has no instance-group summary" in other.get_data(as_text=True) and seen[-1][3] == -1
    assert client.get("/hetero/instance-groups?dag_id=d").status_code == 400


def test_webserver_guard_needs_airflow_2() -> None:
    from airflow_hetero.plugins.flask_view import webserver_guard

    pytest.importorskip("airflow.version")
    from airflow.version import version

    if int(version.split(".")[0]) >= 3:
        with pytest.raises(ImportError):  # airflow.www is gone in Airflow 3: the blueprint is never built there
            webserver_guard()


@pytest.mark.skipif(not AIRFLOW_V_3, reason="Airflow 2.11 serves a Flask blueprint: see the next tests")
def test_plugin_loads_no_web_framework_and_registers_its_view() -> None:
    import subprocess

    code = (
        "import sys; from airflow_hetero.plugins.instance_groups import InstanceGroupsPlugin as P;"
        "print('fastapi' in sys.modules, 'flask' in sys.modules);"
        "print(P.external_views[0]['destination'], P.fastapi_apps[0]['url_prefix'], P.flask_blueprints)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=IMPORT_TIMEOUT
    ).stdout
    assert out.splitlines()[-2:] == ["False False", "task_instance /hetero []"]
    from airflow import plugins_manager

    from airflow_hetero.plugins.instance_groups import InstanceGroupsPlugin

    assert plugins_manager.is_valid_plugin(InstanceGroupsPlugin)


def test_lazy_app_builds_once_and_delegates(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_hetero.plugins import app as app_module

    built: list[int] = []
    calls: list[str] = []

    async def fake(scope: Any, receive: Any, send: Any) -> None:
        calls.append(scope["path"])

    def create() -> Any:
        built.append(1)
        return fake

    monkeypatch.setattr(app_module, "create_app", create)
    lazy = app_module.LazyApp()
    for path in ("/a", "/b"):
        asyncio.run(lazy({"type": "http", "path": path}, None, None))  # type: ignore[arg-type]
    assert built == [1] and calls == ["/a", "/b"]
    assert app_module.map_index_of("{MAP_INDEX}") == -1 and app_module.map_index_of("4") == 4
    assert app_module.map_index_of(None) == -1 and app_module.map_index_of("") == -1


def test_the_plugin_serves_a_blueprint_on_airflow_2_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from flask import Blueprint

    from airflow_hetero.plugins import flask_view, instance_groups

    monkeypatch.setattr(instance_groups, "airflow_major", lambda: 2)
    monkeypatch.setattr(flask_view, "webserver_guard", lambda: lambda view: view)  # airflow.www is 2.x only
    descriptor = instance_groups._FlaskBlueprints()
    (blueprint,) = descriptor.__get__(None, object)
    assert isinstance(blueprint, Blueprint) and blueprint.url_prefix == "/hetero"
    assert descriptor.__get__(None, object) == [blueprint]  # built once
    monkeypatch.setattr(instance_groups, "airflow_major", lambda: 3)
    assert instance_groups._FlaskBlueprints().__get__(None, object) == []


def test_the_summary_operator_still_imports_light() -> None:
    """DAG-parse cost: the verdict's thresholds and the view's link come in, the log parser, the series,
    the page and any web framework do not."""
    import subprocess

    code = (
        "import sys, airflow_hetero.operators.log_summary;"
        "print(sorted(m for m in sys.modules if m.startswith(('airflow_hetero', 'fastapi', 'flask'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=IMPORT_TIMEOUT
    ).stdout
    loaded = out.splitlines()[-1]
    web = ("fastapi", "flask") if AIRFLOW_V_3 else ("fastapi",)  # Airflow 2's BaseOperator loads Flask itself
    # the hook's module (the Amazon provider, boto3); hooks.aws_settings only declares the AWS arguments
    for heavy in ("logs.streams", "logs.per_group", "logs.series", "plugins.page", *web, "hooks.training"):
        assert heavy not in loaded, loaded
    assert "airflow_hetero.logs.verdict" in loaded and "airflow_hetero.links.instance_groups" in loaded


def test_page_shows_the_cost_and_the_suggestions_effect() -> None:
    from airflow_hetero.logs.cost import job_cost
    from airflow_hetero.pricing.price_list import Price

    page = summary(
        suggestion={
            "group": "data_group",
            "instance_count": 4,
            "effect": {
                "instance_count": 2,
                "suggested_count": 4,
                "currency": "USD",
                "per_hour": 7.344,
                "per_run": -3.08,
                "run_seconds": 600.0,
                "run_seconds_after": 304.0,
                "assumption": "if <x> reaches 75%",
            },
        }
    )
    groups = {
        "data_group": {"instance_type": "ml.c5.18xlarge", "instance_count": 2, "instance_seconds": 1200.0},
        "<b>odd</b>": {"instance_type": "ml.p3.2xlarge", "instance_count": 1, "instance_seconds": 600.0},
    }
    prices = {
        "ml.c5.18xlarge": Price("ml.c5.18xlarge", 3.672, "USD", "pricing_api", "stand-in <1>"),
        "ml.p3.2xlarge": Price("ml.p3.2xlarge", None, "USD", reason="refused <2>"),
    }
    page["cost"] = job_cost(groups, None, prices, currency="USD", describe={}, partial=False)  # type: ignore[arg-type]
    html = render_page(page, where="w")
    assert "<h2>Cost <span class='muted'>USD</span></h2>" in html
    assert "<td>data_group</td><td>1200</td><td>3.672</td><td>1.224</td>" in html
    assert "<th>total</th><th></th><th></th><th>unknown</th>" in html
    assert "ml.c5.18xlarge: 3.672 USD/h (Price List API: stand-in &lt;1&gt;)" in html
    assert "Cost unknown for &lt;b&gt;odd&lt;/b&gt;: refused &lt;2&gt;" in html
    assert "if data_group has 4 instead of 2 instances: +7.344 USD/h, -3.08 USD per run; run 600 s -&gt; 304 s" in html
    assert "<x>" not in html


def test_page_shows_a_queued_jobs_attempts_and_their_cost() -> None:
    page = summary()
    attempts = [
        {"training_job": "AWSBatchjob<1>", "status": "Failed", "billable_seconds": 600, "cost": 1.0333},
        {"training_job": "AWSBatchjob-2", "status": "Failed", "billable_seconds": 60, "cost": None, "reason": "no <p>"},
        {"training_job": "job-<1>", "status": "Completed", "billable_seconds": 900, "cost": 2.5},
    ]
    queue = {"service_job": "job<1>", "job_id": "id-1", "job_queue": "gpu-queue", "currency": "USD"}
    page["queue_attempts"] = {**queue, "attempts": attempts[::2], "earlier_cost": 1.0333, "total": 3.5333}
    html = render_page(page, where="w")
    assert "<h2>Queue <span class='muted'>service job job&lt;1&gt; (id-1) in gpu-queue</span></h2>" in html
    assert "<tr><td>AWSBatchjob&lt;1&gt;</td><td>Failed</td><td>600</td><td>1.0333</td></tr>" in html
    assert "<tr><th>earlier attempts</th><th></th><th></th><th>1.0333</th></tr>" in html
    assert "<tr><th>all attempts</th><th></th><th></th><th>3.5333</th></tr>" in html
    page["queue_attempts"] = {**queue, "attempts": attempts, "earlier_cost": None, "total": None}
    html = render_page(page, where="w")
    assert '<td>60</td><td title="no &lt;p&gt;">unknown</td>' in html
    assert "<tr><th>all attempts</th><th></th><th></th><th>unknown</th></tr>" in html
    del page["queue_attempts"]
    assert "<h2>Queue" not in render_page(page, where="w")  # a job that was not queued
