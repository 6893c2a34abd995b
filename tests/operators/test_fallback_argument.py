"""The operator's ``fallback_instance_types``: templated, checked at DAG parse and at render time, both modes.

(The fallback loop itself is tested with the operator's capacity handling.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import pytest
import yaml
from support.moto_jobs import hetero_request

from airflow_hetero._compat import AirflowFailException
from airflow_hetero.definition.errors import JobDefinitionError
from airflow_hetero.operators import HeteroTrainingOperator

JOB: dict[str, Any] = yaml.safe_load((Path(__file__).parents[1] / "rule_examples.yaml").read_text())["base"]
GPU = "instance_group_2"  # ml.p3dn.24xlarge in JOB; the request's GPU group is dnn_group (ml.p3.2xlarge)


def operator(**kwargs: Any) -> HeteroTrainingOperator:
    kwargs.setdefault("deferrable", False)
    return HeteroTrainingOperator(task_id="train", aws_conn_id=None, **kwargs)


def context() -> dict[str, Any]:
    ti = MagicMock(dag_id="retrain", task_id="train", run_id="manual__1", map_index=-1)
    return {"ti": ti, "run_id": "manual__1", "params": {"fallback": "ml.p4d.24xlarge"}}


def test_the_argument_is_a_template_field_kept_as_given() -> None:
    given = {GPU: ["ml.p4d.24xlarge", {"instance_type": "ml.g5.48xlarge", "instance_count": 2}]}
    op = operator(job=JOB, fallback_instance_types=given)
    assert "fallback_instance_types" in op.template_fields
    assert op.fallback_instance_types == given


@pytest.mark.parametrize(
    ("mode", "given", "message"),
    [
        ("job", {GPU: ["ml.c5.xlarge"]}, rf"fallback_instance_types\.{GPU}\[0\]: 'ml\.c5\.xlarge' is a CPU type"),
        ("job", {"gpu": ["ml.p4d.24xlarge"]}, r"fallback_instance_types\.gpu: unknown instance group 'gpu'"),
        ("request", {"dnn_group": ["ml.p3.2xlarge"]}, r"dnn_group\[0\]: 'ml\.p3\.2xlarge' is the group's own"),
        ("request", {"dnn_group": ["ml.p4d.24xlarg"]}, r"dnn_group\[0\]: 'ml\.p4d\.24xlarg' is not a SageMaker"),
        ("request", ["ml.p4d.24xlarge"], r"fallback_instance_types: must be a mapping of instance group name"),
    ],
)
def test_a_bad_argument_fails_at_dag_parse_naming_its_path(mode: str, given: Any, message: str) -> None:
    source = {"job": JOB} if mode == "job" else {"request": hetero_request("provider-job")}
    with pytest.raises(JobDefinitionError, match=message):
        operator(**source, fallback_instance_types=given)


def test_a_bad_field_in_the_definition_fails_at_dag_parse() -> None:
    job = {**JOB, "instance_groups": [JOB["instance_groups"][0], {**JOB["instance_groups"][1]}]}
    job["instance_groups"][1]["fallback_instance_types"] = ["ml.p3dn.24xlarge"]
    with pytest.raises(JobDefinitionError, match=r"instance_groups\[1\]\.fallback_instance_types\[0\]: .*own"):
        operator(job=job)


def test_with_a_definition_file_the_argument_is_checked_alone_at_parse(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(JOB))
    with pytest.raises(
        JobDefinitionError, match=r"fallback_instance_types\.any\[0\]\.instance_count: must be at least"
    ):
        operator(
            job=str(path), fallback_instance_types={"any": [{"instance_type": "ml.p4d.24xlarge", "instance_count": 0}]}
        )
    assert operator(job=str(path), fallback_instance_types={"any": ["ml.p4d.24xlarge"]}).job == str(path)


def test_a_templated_argument_is_checked_once_rendered() -> None:
    op = operator(job=JOB, fallback_instance_types={"instance_group_1": ["{{ params.fallback }}"]})
    with pytest.raises(AirflowFailException, match=r"fallback_instance_types\.instance_group_1\[0\]: .*GPU type"):
        op.render_template_fields(context())  # type: ignore[arg-type]
    good = operator(job=JOB, fallback_instance_types={GPU: ["{{ params.fallback }}"]})
    good.render_template_fields(context())  # type: ignore[arg-type]
    assert good.fallback_instance_types == {GPU: ["ml.p4d.24xlarge"]}
    assert good.load_definition(context()).fallbacks == {"instance_group_1": [], GPU: [("ml.p4d.24xlarge", 1)]}  # type: ignore[arg-type]
