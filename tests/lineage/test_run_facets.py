"""OpenLineage run facets that name the SageMaker job (issue 36, item 3), through the provider's extraction path.

On complete and on failure: the job's ARN as ``externalQuery``, the processing engine, the identity tags as run
tags, the instance groups with their billed seconds and cost (a custom facet that validates against the schema the
package ships), the job type as a job facet; the model output typed ``MODEL``. The OpenLineage client's own classes
serialize every facet (``Serde``).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any
from unittest.mock import MagicMock

import jsonschema
import pytest
from openlineage.client.serde import Serde
from support.example_jobs import example_job
from support.moto_jobs import ROLE, MotoJobs

from airflow_hetero.job.identity import TaskIdentity
from airflow_hetero.job.outcome import TrainingJobFailedError
from airflow_hetero.lineage.run_facets import INSTANCE_GROUPS_SCHEMA_FILE, INSTANCE_GROUPS_SCHEMA_URL
from airflow_hetero.operators import HeteroTrainingOperator

JOB = example_job(
    "hetero-facets",
    role=ROLE,
    output_path="s3://bucket/models",
    inputs={"raw": {"s3_data": "s3://raw-bucket/week/", "instance_groups": ["data_group"]}},
)
PRICES = {"ml.c5.xlarge": 0.25, "ml.p3.2xlarge": 3.5}
TI = {"dag_id": "retrain", "task_id": "train", "run_id": "manual__1", "map_index": -1}


def run(**kwargs: Any) -> HeteroTrainingOperator:
    """The operator after its ``execute`` (a failure kept: the listener then asks for the failure's facets)."""
    op = HeteroTrainingOperator(
        task_id="train", job=JOB, aws_conn_id=None, deferrable=False, print_log=False, check_interval=0.01, **kwargs
    )
    ti = MagicMock(**TI)
    with contextlib.suppress(TrainingJobFailedError):
        op.execute({"ti": ti, "run_id": TI["run_id"]})  # type: ignore[arg-type]
    return op


def extract(task: Any, state: str) -> Any:
    """What the OpenLineage listener collects after the task ends in ``state``: the provider's ExtractorManager."""
    from airflow.providers.openlineage.extractors.manager import ExtractorManager
    from airflow.utils.state import TaskInstanceState

    ti = MagicMock(task=task, **TI)
    return ExtractorManager().extract_metadata(
        dagrun=MagicMock(run_id=TI["run_id"]),
        task=task,
        task_instance_state=TaskInstanceState(state),
        task_instance=ti,
    )


def as_json(facets: dict[str, Any]) -> dict[str, Any]:
    return {name: Serde.to_dict(facet) for name, facet in facets.items()}


def test_a_completed_job_is_named_by_its_run_facets(completing: MotoJobs) -> None:
    op = run(prices=PRICES, use_pricing_api=False)
    lineage = extract(op, "success")
    facets = as_json(lineage.run_facets)
    arn = op.job_result["training_job_arn"] if op.job_result else None
    assert facets["externalQuery"]["externalQueryId"] == arn and facets["externalQuery"]["source"] == "sagemaker"
    engine = facets["sagemakerProcessingEngine"]
    assert (engine["name"], engine["version"]) == ("Amazon SageMaker Training", "2017-07-24")
    tags = {t["key"]: t["value"] for t in facets["tags"]["tags"]}
    assert tags == {t["Key"]: t["Value"] for t in TaskIdentity(**TI).tags()}  # type: ignore[arg-type]
    groups = facets["sagemakerInstanceGroups"]
    # half an hour of 2 x ml.c5.xlarge at 0.25 and 1 x ml.p3.2xlarge at 3.5
    assert groups["groups"] == [
        {"name": "data_group", "instanceType": "ml.c5.xlarge", "instanceCount": 2, "billedSeconds": 3600.0,
         "pricePerHour": 0.25, "cost": 0.25},
        {"name": "dnn_group", "instanceType": "ml.p3.2xlarge", "instanceCount": 1, "billedSeconds": 1800.0,
         "pricePerHour": 3.5, "cost": 1.75},
    ]  # fmt: skip
    assert (groups["totalCost"], groups["currency"]) == (2.0, "USD")
    job_type = Serde.to_dict(lineage.job_facets["sagemakerJobType"])
    assert (job_type["processingType"], job_type["integration"], job_type["jobType"]) == (
        "BATCH",
        "SAGEMAKER",
        "TRAINING_JOB",
    )
    (model,) = lineage.outputs
    assert Serde.to_dict(model.facets["datasetType"])["datasetType"] == "MODEL"


def test_the_instance_groups_facet_validates_against_the_packaged_schema(completing: MotoJobs) -> None:
    facet = as_json(extract(run(prices=PRICES, use_pricing_api=False), "success").run_facets)["sagemakerInstanceGroups"]
    schema = json.loads(INSTANCE_GROUPS_SCHEMA_FILE.read_text(encoding="utf-8"))
    assert (
        facet["_schemaURL"] == INSTANCE_GROUPS_SCHEMA_URL == schema["$id"] + "#/$defs/SageMakerInstanceGroupsRunFacet"
    )
    base, own = schema["$defs"]["SageMakerInstanceGroupsRunFacet"]["allOf"]
    assert base["$ref"].endswith("OpenLineage.json#/$defs/RunFacet")  # _producer, _schemaURL: OpenLineage's
    jsonschema.Draft202012Validator(own).validate(facet)
    assert facet["_producer"].startswith("https://")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(own).validate({**facet, "groups": [{"name": "x"}]})


def test_an_unpriced_group_leaves_its_cost_and_the_total_unknown(completing: MotoJobs) -> None:
    op = run(prices={"ml.c5.xlarge": 0.25}, use_pricing_api=False)
    groups = as_json(extract(op, "success").run_facets)["sagemakerInstanceGroups"]
    assert [g.get("cost") for g in groups["groups"]] == [0.25, None] and "totalCost" not in groups  # None: left out
    schema = json.loads(INSTANCE_GROUPS_SCHEMA_FILE.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema["$defs"]["SageMakerInstanceGroupsRunFacet"]["allOf"][1]).validate(groups)


def test_a_failed_job_is_named_on_failure_without_a_model(failing: MotoJobs) -> None:
    op = run(prices=PRICES, use_pricing_api=False)
    assert op.job_result is not None and op.job_result["status"] == "Failed"
    lineage = extract(op, "failed")
    facets = as_json(lineage.run_facets)
    assert facets["externalQuery"]["externalQueryId"] == op.job_result["training_job_arn"]
    assert facets["sagemakerInstanceGroups"]["totalCost"] == 2.0  # a failed job bills too
    assert lineage.outputs == [] and [d.name for d in lineage.inputs] == ["week"]


def test_no_facets_when_the_task_saw_no_job() -> None:
    op = HeteroTrainingOperator(task_id="train", job=JOB)
    assert op.get_openlineage_facets_on_failure(MagicMock(**TI)) is None
