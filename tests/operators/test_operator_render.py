"""The definition is rendered at template-render time; render errors fail without retries.

Unit tests call ``render_template_fields`` as Airflow does before ``execute``; the DAG test runs a
task with ``retries=2`` under ``dag.test()`` and checks it ends failed, not up for retry.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import pytest
from support.moto_jobs import ROLE, MotoJobs, mocked_jobs
from support.task_logs import record_logs

from airflow_hetero._compat import AirflowFailException
from airflow_hetero.hooks.training import HeteroTrainingHook
from airflow_hetero.operators import HeteroTrainingOperator

YAML = f"""
role: {ROLE}
image_uri: 123456789012.dkr.ecr.us-east-1.amazonaws.com/hetero-train:latest
entry_point: train.py
source_dir: s3://code/src/sourcedir.tar.gz
output_path: s3://bucket/models
base_job_name: hetero-render
instance_groups:
  - {{instance_group_name: data_group, instance_type: ml.c5.xlarge, instance_count: 2}}
  - {{instance_group_name: dnn_group, instance_type: ml.p3.2xlarge, instance_count: 1}}
inputs:
  train: {{s3_data: "s3://bucket/raw/{{{{ params.week }}}}/", instance_groups: [data_group]}}
hyperparameters:
  week: "{{{{ params.week }}}}"
"""


@pytest.fixture
def jobs(monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoJobs]:
    with mocked_jobs(monkeypatch) as jobs:
        yield jobs


def context(**params: Any) -> dict[str, Any]:
    ti = MagicMock(dag_id="retrain", task_id="train", run_id="manual__1", map_index=-1)
    return {"ti": ti, "run_id": "manual__1", "params": params}


def file_operator(tmp_path: Path, text: str = YAML, **kwargs: Any) -> HeteroTrainingOperator:
    from airflow.providers.common.compat.sdk import DAG

    (tmp_path / "jobs").mkdir(exist_ok=True)
    (tmp_path / "jobs" / "train.yaml").write_text(text)
    with DAG("retrain", schedule=None) as dag:
        op = HeteroTrainingOperator(
            task_id="train", job="jobs/train.yaml", aws_conn_id=None, deferrable=False, print_log=False, **kwargs
        )
    dag.fileloc = str(tmp_path / "dag.py")
    return op


def test_a_file_definition_renders_into_the_template_field(tmp_path: Path) -> None:
    op = file_operator(tmp_path)
    op.render_template_fields(context(week="2026-11-22"))  # type: ignore[arg-type]
    assert isinstance(op.job, dict)  # what Rendered Templates shows: the final definition
    assert op.job["inputs"]["train"]["s3_data"] == "s3://bucket/raw/2026-11-22/"
    assert op.job["hyperparameters"]["week"] == "2026-11-22"
    assert op.job["instance_groups"][1] == {
        "instance_group_name": "dnn_group",
        "instance_type": "ml.p3.2xlarge",
        "instance_count": 1,
    }


def test_the_aws_fields_are_templated(tmp_path: Path) -> None:
    op = file_operator(tmp_path)
    op.aws_conn_id, op.region_name, op.verify = "{{ params.conn }}", "{{ params.region }}", "{{ params.ca }}"
    op.render_template_fields(context(week="w", conn="aws_prod", region="eu-west-1", ca="/etc/ca.pem"))  # type: ignore[arg-type]
    assert (op.aws_conn_id, op.region_name, op.verify) == ("aws_prod", "eu-west-1", "/etc/ca.pem")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (YAML.replace("params.week", "data_interval_start | ds"), "template error: UndefinedError"),
        (YAML.replace("{{ params.week }}", "{{ params.week "), "template error: TemplateSyntaxError"),
        (YAML.replace("ml.c5.xlarge", '"ml.{{ params.week }}"'), r"instance_groups\[0\]\.instance_type"),
        ("role: [unclosed", "syntax error"),
    ],
)
def test_render_errors_fail_without_retries_and_submit_nothing(
    jobs: MotoJobs, tmp_path: Path, text: str, message: str
) -> None:
    op = file_operator(tmp_path, text)
    with pytest.raises(AirflowFailException, match=message):
        op.render_template_fields(context(week="2026-11-22"))  # type: ignore[arg-type]
    assert jobs.calls["CreateTrainingJob"] == 0


def test_the_request_is_in_the_log_before_it_is_sent(jobs: MotoJobs, tmp_path: Path, monkeypatch: Any) -> None:
    op = file_operator(tmp_path, wait_for_completion=False)
    logged = record_logs(op)
    seen_at_submission: list[str] = []
    original = HeteroTrainingHook.create_training_job

    def create(self: HeteroTrainingHook, request: dict[str, Any], **kwargs: Any) -> Any:
        seen_at_submission.extend(logged.lines)
        return original(self, request, **kwargs)

    monkeypatch.setattr(HeteroTrainingHook, "create_training_job", create)
    ctx = context(week="2026-11-22")
    op.render_template_fields(ctx)  # type: ignore[arg-type]
    name = op.execute(ctx)["training_job_name"]
    (entry,) = [line for line in seen_at_submission if line.startswith("CreateTrainingJob request for")]
    head, _, body = entry.partition("\n")
    assert head == f"CreateTrainingJob request for {name}:"
    request = json.loads(body)
    assert request["TrainingJobName"] == name
    assert [g["InstanceGroupName"] for g in request["ResourceConfig"]["InstanceGroups"]] == ["data_group", "dnn_group"]
    described = jobs.backend.describe_training_job(name)
    assert described["InputDataConfig"] == request["InputDataConfig"]  # what was logged is what was sent


DAG_FILE = """
from datetime import timedelta

import pendulum
from airflow.providers.common.compat.sdk import DAG
from airflow_hetero.operators import HeteroTrainingOperator

JOB = {job!r}

with DAG("hetero_render_fail", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
    HeteroTrainingOperator(
        task_id="submit",
        job=JOB,
        aws_conn_id="aws_none",
        retries=2,
        retry_delay=timedelta(seconds=1),  # were it retried, dag.test() would run all three tries
        wait_for_completion=False,
    )
"""


@pytest.mark.slow
def test_a_template_error_under_dag_test_fails_the_task_without_retry(
    airflow_db: None, jobs: MotoJobs, tmp_path: Path
) -> None:
    import importlib.util

    from airflow.configuration import conf

    job = {
        "role": ROLE,
        "image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/hetero-train:latest",
        "entry_point": "train.py",
        "output_path": "s3://bucket/models/{{ undefined_name | ds }}",
        "instance_groups": [{"instance_group_name": "g", "instance_type": "ml.c5.xlarge", "instance_count": 1}],
    }
    folder = Path(conf.get("core", "dags_folder"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "hetero_render_fail_dag.py"
    path.write_text(DAG_FILE.format(job=job))
    try:
        spec = importlib.util.spec_from_file_location("hetero_render_fail_dag", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        dag_run = module.dag.test()
    finally:
        path.unlink()
    (ti,) = dag_run.get_task_instances()
    assert str(ti.state) in ("failed", "TaskInstanceState.FAILED")
    assert ti.try_number == 1  # failed on its first try: retries=2 left unused
    assert jobs.calls["CreateTrainingJob"] == 0
