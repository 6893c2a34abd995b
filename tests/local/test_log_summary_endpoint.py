"""The log summary end to end against the offline endpoint, with real jobs whose hosts really run.

One :class:`LocalEndpoint` for the module; each job's training script uses the runtime helper
(``run_by_group`` prints the marker), logs metric lines matching the job's MetricDefinitions and,
on one data host, an error line. Expected groups come from the hosts' own ``resourceconfig.json``
(the endpoint shuffles hosts into groups), never from host numbers. The endpoint samples metrics
every 5 s, longer than these hosts live: utilisation must still be reported (the demo's old bug).
"""

from __future__ import annotations

import json
import re
import time
from typing import Any
from unittest.mock import MagicMock

import pytest
from support.local_jobkit import host_metric_names, log_lines, put_source, request, unique, wait

from airflow_hetero._compat import AIRFLOW_V_3
from airflow_hetero.amounts import round_amount
from airflow_hetero.local import LocalEndpoint
from airflow_hetero.logs.per_group import CostSpec, natural_key
from airflow_hetero.logs.summarize import summarize_training_job
from airflow_hetero.logs.table import format_table

pytestmark = pytest.mark.slow

#: Hosts live far less than this sampling interval (s): utilisation must still be reported.
ENDPOINT_RUN = {"stop_grace": 1.0, "metrics_interval": 5.0}
GROUPS = (("data_group", "ml.c5.xlarge", 2), ("dnn_group", "ml.p3.2xlarge", 1))
METRIC_DEFINITIONS = [
    {"Name": "train:loss", "Regex": r"loss=([0-9.]+)"},
    {"Name": "train:acc", "Regex": r"acc=([0-9.]+)"},
]
#: (loss, acc) per epoch: the best loss (0.4) is not the last one (0.6).
EPOCHS = [(0.9, 0.5), (0.4, 0.7), (0.6, 0.8)]
SCRIPT = f"""
import argparse
import time

from airflow_hetero import runtime

parser = argparse.ArgumentParser()
parser.add_argument("--hold", type=float, default=0.0)
parser.add_argument("--fail", type=int, default=0)
args, _ = parser.parse_known_args()
env = runtime.environment()


def data():
    print(f"{{env.current_host}}: serving shards", flush=True)
    if env.current_host == env.current_instance_group_hosts[0]:
        print(f"ERROR {{env.current_host}}: shard 2 failed its checksum, re-reading", flush=True)
    time.sleep(0.5)  # serving; hosts that end within 0.1 s get no memory figure
    print(f"{{env.current_host}}: done", flush=True)


def train():
    for epoch, (loss, acc) in enumerate({EPOCHS!r}, 1):
        sum(i * i for i in range(200_000))  # some CPU per epoch
        print(f"epoch={{epoch}} loss={{loss}} acc={{acc}}", flush=True)
    if args.fail:
        raise RuntimeError("NCCL error: unhandled system error")
    if args.hold:
        print("holding", flush=True)
        time.sleep(args.hold)
    print("model saved", flush=True)


runtime.run_by_group({{"data_group": data, "dnn_group": train}}, env=env)
"""


@pytest.fixture(scope="module")
def source(s3: Any) -> str:
    """The training code, uploaded once for every job of the module."""
    return put_source(s3, "summary-e2e", SCRIPT)


@pytest.fixture(scope="module")
def clients(endpoint: LocalEndpoint) -> dict[str, Any]:
    return {
        "sagemaker_client": endpoint.client("sagemaker"),
        "logs_client": endpoint.client("logs"),
        "cloudwatch_client": endpoint.client("cloudwatch"),
    }


def _start_job(sm: Any, source: str, **hyperparameters: Any) -> str:
    """CreateTrainingJob as the SDK sends it, with the job's MetricDefinitions; returns the job name."""
    name = unique("summary-e2e")
    body = request(name, source, groups=GROUPS, hyperparameters=hyperparameters)
    body["AlgorithmSpecification"]["MetricDefinitions"] = METRIC_DEFINITIONS
    sm.create_training_job(**body)
    return name


def _layout(endpoint: LocalEndpoint, job: str) -> dict[str, list[str]]:
    """Group -> hosts, from every host's own resourceconfig.json (they must agree)."""
    configs = [
        json.loads((path / "input/config/resourceconfig.json").read_text())
        for path in (endpoint.job_dir(job) / "hosts").iterdir()
    ]
    layouts = [{g["instance_group_name"]: g["hosts"] for g in c["instance_groups"]} for c in configs]
    assert all(layout == layouts[0] for layout in layouts)
    for config in configs:
        assert config["current_host"] in layouts[0][config["current_group_name"]]
    return layouts[0]


def _stream_events(logs: Any, job: str) -> dict[str, int]:
    """Host -> number of events in its log stream, counted independently of the summariser."""
    group = "/aws/sagemaker/TrainingJobs"
    counts: dict[str, int] = {}
    for stream in logs.describe_log_streams(logGroupName=group, logStreamNamePrefix=f"{job}/")["logStreams"]:
        name, token, total = stream["logStreamName"], None, 0
        while True:
            kwargs = {"nextToken": token} if token else {}
            page = logs.get_log_events(logGroupName=group, logStreamName=name, startFromHead=True, **kwargs)
            total += len(page["events"])
            if page["nextForwardToken"] == token:
                break
            token = page["nextForwardToken"]
        counts[name.removeprefix(f"{job}/").rsplit("-", 1)[0]] = total
    return counts


@pytest.fixture(scope="module")
def completed_job(endpoint: LocalEndpoint, clients: dict[str, Any], source: str) -> str:
    name = _start_job(clients["sagemaker_client"], source)
    assert wait(clients["sagemaker_client"], name)["TrainingJobStatus"] == "Completed"
    return name


def _check_groups(summary: dict[str, Any], layout: dict[str, list[str]], killed: tuple[str, ...] = ()) -> None:
    """Hosts per group as the endpoint assigned them, each mapped by its marker line; a host in ``killed``
    (stopped when another host failed the job) may have been stopped before its script printed the marker:
    the toolkit's start-up lines map it then."""
    assert set(summary["groups"]) == set(layout)
    for name, instance_type, count in GROUPS:
        group = summary["groups"][name]
        assert group["hosts"] == sorted(layout[name], key=natural_key)
        assert group["instance_type"] == instance_type and group["instance_count"] == count
        for host in layout[name]:
            assert group["mapped_by"][host] in (("marker", "toolkit") if host in killed else ("marker",)), host
        assert set(group["mapped_by"]) == set(layout[name])
    assert summary["unmapped_hosts"] == [] and summary["unmapped"] is None
    assert summary["problems"] == []


def test_summary_of_a_completed_job(endpoint: LocalEndpoint, clients: dict[str, Any], completed_job: str) -> None:
    summary = summarize_training_job(completed_job, **clients)
    layout = _layout(endpoint, completed_job)
    assert sorted(host for hosts in layout.values() for host in hosts) == ["algo-1", "algo-2", "algo-3"]
    assert summary["training_job_name"] == completed_job
    assert summary["status"] == "Completed" and summary["partial"] is False
    assert [step["status"] for step in summary["timeline"]] == [
        "Starting",
        "Downloading",
        "Training",
        "Uploading",
        "Completed",
    ]
    _check_groups(summary, layout)

    events = _stream_events(clients["logs_client"], completed_job)
    data, dnn = summary["groups"]["data_group"], summary["groups"]["dnn_group"]
    for name, group in summary["groups"].items():
        assert group["events"] == sum(events[host] for host in layout[name]) > 0
        assert [s.removeprefix(f"{completed_job}/").rsplit("-", 1)[0] for s in group["log_streams"]] == group["hosts"]
        assert set(group["tail"]) == set(group["hosts"])
    for host in data["hosts"]:
        assert data["tail"][host][-1] == f"{host}: done"
    assert dnn["tail"][layout["dnn_group"][0]][-1] == "model saved"

    # The error line of the data group's first host, attributed to it; nothing else counts.
    first_data_host = layout["data_group"][0]
    assert data["errors"] == 1 and dnn["errors"] == 0 and summary["errors"] == 1
    ((sample,),) = [data["error_samples"]]
    assert sample["host"] == first_data_host
    assert sample["line"] == f"ERROR {first_data_host}: shard 2 failed its checksum, re-reading"
    assert summary["warnings"] == 0

    # The job's own MetricDefinitions, per group: last and best differ for the loss.
    assert data["metrics"] == {}
    assert dnn["metrics"] == {
        "train:acc": {"last": 0.8, "best": 0.8, "goal": "max", "count": 3},
        "train:loss": {"last": 0.6, "best": 0.4, "goal": "min", "count": 3},
    }

    # Hosts lived far less than the 5 s sampling interval, yet CPU and memory are reported.
    for name, group in summary["groups"].items():
        util = group["utilization"]
        assert util["cpu"]["hosts"] == util["memory"]["hosts"] == len(layout[name])
        assert util["cpu"]["max"] > 0 and util["memory"]["avg"] > 0
        assert util["gpu"] is None and util["gpu_memory"] is None  # no GPUs locally
    assert summary["api_calls"]["GetMetricData"] == 1

    table = format_table(summary)
    lines = table.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("group ") and "cpu avg/max" in line)
    for line in lines[header + 1 :]:  # the utilisation table, the second of the two stacked tables
        if line.startswith(("data_group ", "dnn_group ")):
            cells = line.split()
            assert cells[-4] != "-" and cells[-3] != "-", line  # cpu, mem
            assert cells[-2:] == ["-", "-"], line  # gpu, gpu mem
    assert "local runs (the offline endpoint) have no GPUs" in " ".join(table.split("\n  "))  # wrapped


def test_operator_returns_the_summary_with_each_group_once(
    endpoint: LocalEndpoint, completed_job: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_hetero.operators.log_summary import HeteroLogSummaryOperator

    monkeypatch.setenv("AIRFLOW_CONN_AWS_DEFAULT", endpoint.airflow_connection_json())
    ti = MagicMock()
    operator = HeteroLogSummaryOperator(task_id="summarize", job_name=completed_job, tail_lines=2)
    summary = operator.execute({"ti": ti})  # type: ignore[arg-type]

    _check_groups(summary, _layout(endpoint, completed_job))
    pushed = {call.kwargs["key"]: call.kwargs["value"] for call in ti.xcom_push.call_args_list}
    assert pushed == {  # each group once, in return_value: no group_<name> copies
        "verdict": summary["verdict"],
        "cost": summary["cost"],  # new: the cost per group, priced through the same connection
        **({"_link_InstanceGroupsLink": pushed.get("_link_InstanceGroupsLink")} if AIRFLOW_V_3 else {}),
    }
    # prices came from the endpoint's GetProducts, read as from AWS (same connection, pricing client)
    cost = summary["cost"]
    for name, group in summary["groups"].items():
        price = cost["prices"][group["instance_type"]]
        assert price["source"] in ("pricing_api", "cache") and "stand-in" in price["description"]
        assert cost["groups"][name]["cost"] == round_amount(group["instance_seconds"] * price["per_hour"] / 3600)
    assert cost["total"] == round_amount(sum(g["cost"] for g in cost["groups"].values()))
    groups = summary["groups"]
    assert all(len(lines) <= 2 for lines in groups["data_group"]["tail"].values())
    assert groups["dnn_group"]["metrics"]["train:loss"]["best"] == 0.4
    assert groups["data_group"]["utilization"]["cpu"] is not None
    json.dumps(summary)  # a plain, JSON-serialisable XCom value


def test_summary_of_a_failed_job_names_the_host(endpoint: LocalEndpoint, clients: dict[str, Any], source: str) -> None:
    name = _start_job(clients["sagemaker_client"], source, fail=1)
    assert wait(clients["sagemaker_client"], name)["TrainingJobStatus"] == "Failed"
    summary = summarize_training_job(name, **clients)
    layout = _layout(endpoint, name)
    # the data hosts are stopped when the trainer fails: on a busy machine (make test's parallel suites)
    # one was stopped before its script had started, mapped by the toolkit's lines instead of the marker
    _check_groups(summary, layout, killed=tuple(layout["data_group"]))
    (trainer,) = layout["dnn_group"]
    assert summary["status"] == "Failed" and trainer in summary["failure_reason"]
    dnn = summary["groups"]["dnn_group"]
    assert dnn["errors"] >= 1
    traceback = next(s for s in dnn["error_samples"] if s["line"].startswith("Traceback"))
    assert traceback["host"] == trainer
    assert traceback["exception"] == "RuntimeError: NCCL error: unhandled system error"
    assert dnn["metrics"]["train:loss"]["count"] == 3  # what it logged before failing
    assert dnn["utilization"]["cpu"] is not None and dnn["utilization"]["memory"] is not None


def _late_figures(monkeypatch: pytest.MonkeyPatch, delay: float) -> None:
    """Make the endpoint's sampler put each figure ``delay`` seconds late (its thread starved on a loaded
    machine), while the host's log lines are shipped on time."""
    from airflow_hetero.local.training.utilisation import MetricsSampler

    publish = MetricsSampler.publish

    def late(self: MetricsSampler, figures: dict[str, tuple[float, float | None]], at: float | None = None) -> None:
        time.sleep(delay)
        publish(self, figures, at)

    monkeypatch.setattr(MetricsSampler, "publish", late)


@pytest.mark.parametrize("figure_delay", [0.0, 1.0], ids=["prompt-figures", "late-figures"])
def test_partial_summary_while_the_job_runs(
    endpoint: LocalEndpoint, clients: dict[str, Any], source: str, monkeypatch: pytest.MonkeyPatch, figure_delay: float
) -> None:
    sm, logs = clients["sagemaker_client"], clients["logs_client"]
    if figure_delay:
        _late_figures(monkeypatch, figure_delay)
    name = _start_job(sm, source, hold=20)
    wait(sm, name, until=("InProgress",))
    deadline = time.monotonic() + 20

    def ready() -> bool:
        """The training host holds and its first figures are in; every host's marker line has been shipped
        (a figure is put by the endpoint's sampler, a line by its shipper: one may come well after the other)."""
        streams = log_lines(logs, name)
        markers = sum(any("[airflow-hetero]" in line for line in lines) for lines in streams.values())
        if not any("holding" in lines for lines in streams.values()) or markers != sum(c for _, _, c in GROUPS):
            return False
        (trainer,) = _layout(endpoint, name)["dnn_group"]
        return host_metric_names(clients["cloudwatch_client"], name, trainer) >= {"CPUUtilization", "MemoryUtilization"}

    while not ready():
        assert time.monotonic() < deadline, "the training host never logged 'holding', a marker or a figure is missing"
        time.sleep(0.1)
    try:
        summary = summarize_training_job(name, **clients)
        layout = _layout(endpoint, name)
        assert summary["status"] == "InProgress" and summary["partial"] is True
        assert summary["secondary_status"] == "Training"
        assert summary["timeline"][-1]["status"] == "Training" and summary["timeline"][-1]["ongoing"] is True
        _check_groups(summary, layout)
        dnn = summary["groups"]["dnn_group"]
        assert dnn["tail"][layout["dnn_group"][0]][-1] == "holding"
        assert dnn["metrics"]["train:loss"] == {"last": 0.6, "best": 0.4, "goal": "min", "count": 3}
        assert dnn["utilization"]["cpu"] is not None and dnn["utilization"]["memory"] is not None
        assert "[partial: job still running]" in format_table(summary)
    finally:
        sm.stop_training_job(TrainingJobName=name)
    assert wait(sm, name)["TrainingJobStatus"] == "Stopped"


def test_cli_summarize_prints_the_operators_table_and_verdict(
    endpoint: LocalEndpoint,
    clients: dict[str, Any],
    completed_job: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
) -> None:
    """``airflow-hetero summarize`` with plain boto3 clients: the same summary the library gives, an
    override for one type and the endpoint's Price List stand-in for the other."""
    from airflow_hetero.cli import main
    from airflow_hetero.logs.report import format_report
    from airflow_hetero.pricing.lookup import training_prices
    from airflow_hetero.pricing.settings import PriceSettings

    monkeypatch.setenv("AIRFLOW_HETERO_CACHE_DIR", str(tmp_path))
    argv = ["summarize", completed_job, "--endpoint-url", endpoint.url, "--region", "us-east-1"]
    assert main([*argv, "--price", "ml.c5.xlarge=0.25", "--json"]) == 0
    printed = json_output(capsys.readouterr().out)
    prices = printed["cost"]["prices"]
    assert prices["ml.c5.xlarge"] == {"per_hour": 0.25, "currency": "USD", "source": "override"}
    assert prices["ml.p3.2xlarge"]["source"] in ("pricing_api", "cache")
    assert "stand-in" in prices["ml.p3.2xlarge"]["description"]
    assert printed["cost"]["total"] is not None

    assert main([*argv, "--price", "ml.c5.xlarge=0.25"]) == 0
    out = without_airflow_log_lines(capsys.readouterr().out)
    pricing = endpoint.client("pricing")
    summary = summarize_training_job(
        completed_job,
        **clients,
        cost=CostSpec(
            lambda types: training_prices(types, "us-east-1", PriceSettings({"ml.c5.xlarge": 0.25}), client=pricing)
        ),
    )
    assert out == f"{format_report(summary)}\n"  # the operator's report: the table, then the verdict
    assert "price of ml.c5.xlarge: 0.25 USD/h (prices=)" in out


def test_cli_summarize_without_the_pricing_api_says_why_a_cost_is_unknown(
    endpoint: LocalEndpoint, completed_job: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from airflow_hetero.cli import main

    argv = ["summarize", completed_job, "--endpoint-url", endpoint.url, "--region", "us-east-1", "--json"]
    assert main([*argv, "--no-pricing-api", "--price", "ml.c5.xlarge=0.25"]) == 0
    cost = json_output(capsys.readouterr().out)["cost"]
    assert cost["total"] is None and cost["groups"]["data_group"]["cost"] is not None
    assert cost["groups"]["dnn_group"]["reason"] == "prices= has none for it and the Pricing API was not asked"
    assert main([*argv, "--price", "ml.c5.xlarge=0.25", "--currency", "EUR"]) == 0
    cost = json_output(capsys.readouterr().out)["cost"]
    assert cost["currency"] == "EUR" and cost["total"] is None
    assert cost["groups"]["dnn_group"]["reason"] == "prices= has no EUR price for it (the Price List is in USD)"


def test_cli_summarize_an_unknown_job_exits_1_with_the_services_words(
    endpoint: LocalEndpoint, capsys: pytest.CaptureFixture[str]
) -> None:
    from airflow_hetero.cli import main

    argv = ["summarize", "no-such-job", "--endpoint-url", endpoint.url, "--region", "us-east-1"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("airflow-hetero summarize: no-such-job: ") and "DescribeTrainingJob" in err


def json_output(out: str) -> Any:
    """The JSON document the CLI printed: Airflow 2.11 may print its own lines to stdout first."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("{"))
    return json.loads("\n".join(lines[start:]))


def without_airflow_log_lines(out: str) -> str:
    """The CLI's own output: Airflow 2.11's logging setup also writes botocore's INFO lines to stdout."""
    return "".join(
        line for line in out.splitlines(keepends=True) if not re.match(r"\[\d{4}-\d\d-\d\dT[^]]*\] \{", line)
    )
