"""The AWS arguments declared once: template fields, defaults, the hook built from them, a light import."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support.example_jobs import example_job

from airflow_hetero.operators import HeteroLogSummaryOperator, HeteroTrainingOperator
from airflow_hetero.sensors import HeteroTrainingSensor
from airflow_hetero.task_arguments import (
    AWS_ARGUMENTS,
    DEFAULT_AWS_CONN_ID,
    AwsSettings,
    aws_template_fields,
)
from airflow_hetero.triggers import HeteroTrainingTrigger

#: How long a fresh interpreter may take to import what the test checks (Airflow, on a loaded 2-core machine).
IMPORT_TIMEOUT = 120
#: The smallest definition that passes the parse-time check.
JOB = example_job(
    image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1",
    entry_point=None,
    source_dir=None,
    groups=None,
    instance_type="ml.c5.xlarge",
    instance_count=1,
)


def test_template_fields_keep_the_tasks_own_first_and_each_once() -> None:
    assert aws_template_fields("job_name") == ("job_name", "aws_conn_id", "region_name", "verify")
    assert aws_template_fields("region_name", "a") == ("region_name", "a", "aws_conn_id", "verify")
    with pytest.raises(TypeError):
        aws_template_fields(("job_name",))  # type: ignore[arg-type]


def test_the_default_connection_is_the_providers() -> None:
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    assert AwsBaseHook.default_conn_name == DEFAULT_AWS_CONN_ID


@pytest.mark.parametrize(
    "holder",
    [
        lambda **aws: HeteroTrainingOperator(task_id="t", job=JOB, **aws),
        lambda **aws: HeteroTrainingSensor(task_id="s", job_name="j", **aws),
        lambda **aws: HeteroLogSummaryOperator(task_id="l", job_name="j", **aws),
        lambda **aws: HeteroTrainingTrigger("j", **aws),
    ],
    ids=["operator", "sensor", "summary", "trigger"],
)
def test_every_task_and_the_trigger_take_the_four_and_build_the_hook_from_them(holder: object) -> None:
    config = {"read_timeout": 9}
    aws = {"aws_conn_id": None, "region_name": "eu-west-1", "verify": "/etc/ca.pem", "botocore_config": config}
    made = holder(**aws)  # type: ignore[operator]
    assert isinstance(made, AwsSettings) and made.aws_settings() == aws
    hook = made.make_hook()
    assert (hook.aws_conn_id, hook.region_name, hook.verify) == (None, "eu-west-1", "/etc/ca.pem")
    assert hook.config.read_timeout == 9
    if not isinstance(made, HeteroTrainingTrigger):
        assert set(AWS_ARGUMENTS) - {"botocore_config"} <= set(type(made).template_fields)


def test_importing_the_settings_loads_neither_the_hook_nor_an_aws_sdk() -> None:
    code = (
        "import json, sys; import airflow_hetero.task_arguments\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('airflow', 'boto', 'aiobotocore')))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, timeout=IMPORT_TIMEOUT, capture_output=True, text=True
    ).stdout
    loaded = set(json.loads(out.strip().splitlines()[-1]))
    assert loaded == {"airflow_hetero", f"{AwsSettings.__module__}"}
