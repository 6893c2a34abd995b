"""Right-sizing end to end on the offline endpoint: the training script, the DAG file and the day-by-day runner
of tests/dags/test_rightsizing_dag.py.

The training script (:data:`SCRIPT`) is a data group feeding a training group: ``batches`` batches, a data host
prepares one in ``prep_seconds``, the trainer trains on one in ``train_seconds``; the data hosts share the
batches. The run lasts ``batches x max(prep / n, train)`` seconds and each host keeps its CPU busy for its own
work's share of it (at most ``duty``, a quarter of a core: the endpoint's hosts share the machine's cores).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pendulum
import pytest

from airflow_hetero.local import LocalEndpoint, RunOptions
from support.dag_files import dag_file
from support.example_jobs import Group, example_job

BUCKET = "rightsizing-dag"
START = pendulum.datetime(2026, 3, 1, tz="UTC")
SCRIPT = '''\
"""A data group feeding a training group: the slower group sets the pace, the other waits."""
import time

from airflow_hetero import runtime

env = runtime.environment()
hp = env.hyperparameters
batches, duty = int(hp["batches"]), float(hp["duty"])
prep, train = float(hp["prep_seconds"]), float(hp["train_seconds"])
data_hosts = len(env.group_hosts("data_group"))
run = batches * max(prep / data_hosts, train)
own = batches * prep / data_hosts if env.current_instance_group == "data_group" else batches * train
share = duty * own / run  # of one core, over the run
began, cpu = time.monotonic(), time.process_time()
while (elapsed := time.monotonic() - began) < run:
    if time.process_time() - cpu < share * elapsed:
        mark = time.process_time()
        while time.process_time() - mark < 0.005:
            pass
    else:
        time.sleep(0.005)
print(f"{env.current_instance_group}: {data_hosts} data host(s), run {run:.2f} s, busy {share:.0%}", flush=True)
'''
_DAG_FILE = textwrap.dedent(
    '''
    """DAGs whose training task right-sizes its data group (apply mode), one per spec."""
    import pendulum

    from airflow.providers.common.compat.sdk import DAG
    from airflow_hetero.operators import HeteroLogSummaryOperator, HeteroTrainingOperator

    SPECS = @SPECS@
    JOBS = @JOBS@


    for name, spec in SPECS.items():
        with DAG(
            "rightsizing_" + name,
            schedule="@daily",
            start_date=pendulum.datetime(2026, 3, 1, tz="UTC"),
            catchup=False,
            default_args={"retries": 0},
        ) as dag:
            HeteroTrainingOperator(
                task_id="train",
                job=JOBS[name],
                check_interval=0.5,
                rightsizing={
                    "groups": {"data_group": {"min_count": 1, "max_count": 8}},
                    "mode": "apply",
                    "objective": spec["objective"],
                },
            ) >> HeteroLogSummaryOperator(
                task_id="summarize",
                training_task_id="train",
                trigger_rule="all_done",
                verdict_thresholds=spec["thresholds"],
                capacity_overrides=spec["capacity_overrides"],
            )
        globals()[dag.dag_id] = dag
    '''
)


def job(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The training job of a spec: ``data_count`` data hosts, ``prep`` and ``train`` seconds per batch, optional
    ``batches`` (40); each host busy a quarter of a core at most."""
    return example_job(
        "rightsize",
        framework_version="2.0",
        entry_point="pipeline.py",
        source_dir="rightsizing_code",
        output_path=f"s3://{BUCKET}/models",
        groups=[Group("data_group", "ml.c5.xlarge", spec["data_count"]), Group("train_group", "ml.g5.xlarge")],
        hyperparameters={
            "batches": spec.get("batches", 40),
            "prep_seconds": spec["prep"],
            "train_seconds": spec["train"],
            "duty": 0.25,  # of a core: the endpoint's hosts share the machine's cores
        },
        max_run=600,
    )


def dag_text(specs: Mapping[str, Mapping[str, Any]]) -> str:
    """A DAG file with one DAG ``rightsizing_<name>`` per spec, running :func:`job` of the spec: the policy's
    ``objective``, the summary's verdict ``thresholds`` and ``capacity_overrides``."""
    jobs = {name: job(spec) for name, spec in specs.items()}
    return _DAG_FILE.replace("@SPECS@", repr(dict(specs))).replace("@JOBS@", repr(jobs))


@contextmanager
def offline_endpoint(workdir: Path) -> Iterator[LocalEndpoint]:
    """The offline endpoint with the DAGs' bucket."""
    with LocalEndpoint(workdir=workdir, run=RunOptions(metrics_interval=0.3)) as ep:
        ep.client("s3").create_bucket(Bucket=BUCKET)
        yield ep


@contextmanager
def installed_dags(name: str, text: str, endpoint: LocalEndpoint, monkeypatch: Any) -> Iterator[Any]:
    """The DAG file ``text`` and the training script in Airflow's DAGs folder, the AWS connection pointing at
    ``endpoint``; the imported module."""
    from airflow.configuration import conf

    monkeypatch.setenv("AIRFLOW_CONN_AWS_DEFAULT", endpoint.airflow_connection_json())
    folder = Path(conf.get("core", "dags_folder"))
    (folder / "rightsizing_code").mkdir(parents=True, exist_ok=True)
    (folder / "rightsizing_code" / "pipeline.py").write_text(SCRIPT)
    with dag_file(name, text) as module:
        yield module


def dag_fixtures(name: str, text: str) -> tuple[Any, Any]:
    """The fixtures a right-sizing e2e module binds as ``endpoint, dag_module = dag_fixtures(...)``: the offline
    endpoint, one per module; the DAG file ``text`` installed as module ``name`` (:func:`installed_dags`), per test
    on the Airflow DB of ``airflow_db``."""

    @pytest.fixture(scope="module", name="endpoint")
    def endpoint_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalEndpoint]:
        with offline_endpoint(tmp_path_factory.mktemp("endpoint")) as ep:
            yield ep

    @pytest.fixture(name="dag_module")
    def dag_module_fixture(airflow_db: None, endpoint: LocalEndpoint, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
        with installed_dags(name, text, endpoint, monkeypatch) as module:
            yield module

    return endpoint_fixture, dag_module_fixture


def run_days(dag: Any, days: int, endpoint: LocalEndpoint) -> list[dict[str, Any]]:
    """Run ``dag`` once per logical date, one day apart, ``days`` times; the training task and the summary
    succeed. Per run: the data group's count and instance type the job really ran (DescribeTrainingJob), the
    training task's decision and the ``rightsizing`` of its return value, the summary's record, next decision and
    the summary itself."""
    from airflow_hetero._compat import AIRFLOW_V_3

    sagemaker = endpoint.client("sagemaker")
    runs: list[dict[str, Any]] = []
    for day in range(days):
        when = START + timedelta(days=day)
        dag_run = dag.test(logical_date=when) if AIRFLOW_V_3 else dag.test(execution_date=when)
        tis = {ti.task_id: ti for ti in dag_run.get_task_instances()}
        assert {t: str(ti.state) for t, ti in tis.items()} == {"train": "success", "summarize": "success"}
        train = tis["train"]
        result = train.xcom_pull(task_ids="train")
        name = train.xcom_pull(task_ids="train", key="training_job_name")
        described = sagemaker.describe_training_job(TrainingJobName=name)
        ran = {g["InstanceGroupName"]: g for g in described["ResourceConfig"]["InstanceGroups"]}
        runs.append(
            {
                "ran": ran["data_group"]["InstanceCount"],
                "type": ran["data_group"]["InstanceType"],
                "job_name": name,
                "decision": train.xcom_pull(task_ids="train", key="rightsizing"),
                "result": result["rightsizing"],
                "record": train.xcom_pull(task_ids="summarize", key="rightsizing_record"),
                "next": train.xcom_pull(task_ids="summarize", key="rightsizing"),
                "summary": train.xcom_pull(task_ids="summarize"),
            }
        )
    return runs


def trace(runs: list[dict[str, Any]]) -> str:
    """One line per run: the count, the verdict, the groups' utilisation, the run's length, the next decision."""
    return "\n".join(
        f"{r['ran']} data hosts: {r['record']['outcome']} {r['record']['verdict']['kind']} "
        f"{ {g: v.get('busy_percent') for g, v in r['record']['groups'].items()} } {r['record']['run_seconds']} s"
        f" -> {r['summary']['rightsizing']['lines']}"
        for r in runs
    )
