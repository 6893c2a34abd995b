"""Whole OpenLineage events of a training task, validated against OpenLineage's own JSON schemas (issue 36, item 3).

The events are built as the OpenLineage provider's listener builds them: its ``ExtractorManager`` asks the operator
for its facets, its ``OpenLineageAdapter`` makes the START, COMPLETE and FAIL RunEvents (with the parent run,
nominal time, processing engine, job type, ownership and tags facets it adds) and the OpenLineage client's file
transport writes them as JSON. Each is then checked whole, and each of its facets against the schema its
``_schemaURL`` names (support.openlineage_schemas): OpenLineage's, vendored, and the package's own.
"""

from __future__ import annotations

import copy
import datetime
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import pytest
from support.example_jobs import example_job
from support.moto_jobs import ROLE, MotoJobs
from support.openlineage_file import read_events
from support.openlineage_schemas import event_problems, facets_of

from airflow_hetero.job.outcome import TrainingJobFailedError
from airflow_hetero.lineage.openlineage import CHANNEL_FACET_SCHEMA
from airflow_hetero.lineage.run_facets import INSTANCE_GROUPS_SCHEMA_URL
from airflow_hetero.operators import HeteroTrainingOperator

JOB = example_job(
    "hetero-events",
    role=ROLE,
    output_path="s3://bucket/models",
    inputs={"raw": {"s3_data": "s3://raw-bucket/week/", "instance_groups": ["data_group"]}},
)
PRICES = {"ml.c5.xlarge": 0.25, "ml.p3.2xlarge": 3.5}
TI = {"dag_id": "retrain", "task_id": "train", "run_id": "manual__1", "map_index": -1, "try_number": 1}
LOGICAL_DATE = datetime.datetime(2026, 11, 23, tzinfo=datetime.UTC)
SPEC = "https://openlineage.io/spec"
#: The schemas a COMPLETE event of the task names: OpenLineage's standard facets and the package's two.
COMPLETE_SCHEMAS = {
    f"{SPEC}/2-0-2/OpenLineage.json#/$defs/RunEvent",
    f"{SPEC}/facets/1-0-2/ExternalQueryRunFacet.json#/$defs/ExternalQueryRunFacet",
    f"{SPEC}/facets/1-1-1/ProcessingEngineRunFacet.json#/$defs/ProcessingEngineRunFacet",
    f"{SPEC}/facets/1-0-0/TagsRunFacet.json#/$defs/TagsRunFacet",
    f"{SPEC}/facets/2-0-4/JobTypeJobFacet.json#/$defs/JobTypeJobFacet",
    f"{SPEC}/facets/1-0-1/DatasetTypeDatasetFacet.json#/$defs/DatasetTypeDatasetFacet",
    f"{SPEC}/facets/1-2-0/ParentRunFacet.json#/$defs/ParentRunFacet",
    f"{SPEC}/facets/1-0-1/NominalTimeRunFacet.json#/$defs/NominalTimeRunFacet",
    INSTANCE_GROUPS_SCHEMA_URL,
    CHANNEL_FACET_SCHEMA,
}


def extract(task: Any, state: str) -> Any:
    """What the listener collects from the task in ``state``: the provider's ExtractorManager."""
    from airflow.providers.openlineage.extractors.manager import ExtractorManager
    from airflow.utils.state import TaskInstanceState

    return ExtractorManager().extract_metadata(
        dagrun=MagicMock(run_id=TI["run_id"]),
        task=task,
        task_instance_state=TaskInstanceState(state),
        task_instance=MagicMock(task=task, **TI),
    )


def emitted_run(tmp_path: Path) -> list[dict[str, Any]]:
    """The task's START, then its COMPLETE or FAIL, as the listener emits them; read back from the file transport."""
    from airflow.providers.openlineage.plugins.adapter import OpenLineageAdapter
    from airflow.providers.openlineage.utils.utils import get_task_parent_run_facet
    from openlineage.client import OpenLineageClient
    from openlineage.client.transport.file import FileConfig, FileTransport

    events = tmp_path / "openlineage.jsonl"
    adapter = OpenLineageAdapter(
        client=OpenLineageClient(transport=FileTransport(FileConfig(log_file_path=str(events), append=True)))
    )
    op = HeteroTrainingOperator(
        task_id="train",
        job=JOB,
        aws_conn_id=None,
        deferrable=False,
        print_log=False,
        check_interval=0.01,
        prices=PRICES,
        use_pricing_api=False,
    )
    run_id = adapter.build_task_instance_run_id("retrain", "train", 1, LOGICAL_DATE, -1)
    parent = adapter.build_dag_run_id("retrain", LOGICAL_DATE, 0)
    common: dict[str, Any] = {
        "run_id": run_id,
        "job_name": "retrain.train",
        "job_description": "Weekly retraining",
        "nominal_start_time": LOGICAL_DATE.isoformat(),
        "nominal_end_time": None,
        "owners": ["ml-platform"],
        "tags": ["retraining"],
    }

    def facets() -> dict[str, Any]:
        return get_task_parent_run_facet(parent_run_id=parent, parent_job_name="retrain", dr_conf={})

    now = datetime.datetime.now(datetime.UTC).isoformat
    adapter.start_task(event_time=now(), task=extract(op, "running"), run_facets=facets(), **common)
    error: TrainingJobFailedError | None = None
    try:
        op.execute({"ti": MagicMock(**TI), "run_id": TI["run_id"]})  # type: ignore[arg-type]
    except TrainingJobFailedError as failed:
        error = failed
    if error is None:
        adapter.complete_task(end_time=now(), task=extract(op, "success"), run_facets=facets(), **common)
    else:
        adapter.fail_task(end_time=now(), task=extract(op, "failed"), error=error, run_facets=facets(), **common)
    return read_events(events)


def schema_urls(event: dict[str, Any]) -> set[str]:
    return {event["schemaURL"], *(facet["_schemaURL"] for _, facet in facets_of(event))}


def test_the_events_of_a_completed_job_validate_whole(completing: MotoJobs, tmp_path: Path) -> None:
    start, complete = emitted_run(tmp_path)
    assert (start["eventType"], complete["eventType"]) == ("START", "COMPLETE")
    assert event_problems(start) == [] and event_problems(complete) == []
    assert schema_urls(complete) >= COMPLETE_SCHEMAS
    (name,) = completing.names()
    facets = complete["run"]["facets"]
    assert facets["externalQuery"]["externalQueryId"] == completing.job(name).arn
    assert [g["instanceType"] for g in facets["sagemakerInstanceGroups"]["groups"]] == ["ml.c5.xlarge", "ml.p3.2xlarge"]
    assert complete["job"]["facets"]["sagemakerJobType"]["jobType"] == "TRAINING_JOB"
    assert complete["job"]["facets"]["jobType"]["integration"] == "AIRFLOW"  # the provider's own, beside ours
    (model,) = complete["outputs"]
    assert model["facets"]["datasetType"]["datasetType"] == "MODEL"


def test_the_events_of_a_failed_job_validate_whole_and_name_it(failing: MotoJobs, tmp_path: Path) -> None:
    start, fail = emitted_run(tmp_path)
    assert (start["eventType"], fail["eventType"]) == ("START", "FAIL")
    assert event_problems(start) == [] and event_problems(fail) == []
    (name,) = failing.names()
    facets = fail["run"]["facets"]
    assert facets["externalQuery"]["externalQueryId"] == failing.job(name).arn
    assert facets["errorMessage"]["message"] and facets["sagemakerInstanceGroups"]["totalCost"] == 2.0
    assert f"{SPEC}/facets/1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet" in schema_urls(fail)
    assert fail["outputs"] == []


def set_in(event: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    target: Any = event
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]
    target[last] = value


def dropped(event: dict[str, Any], path: str) -> None:
    *parents, last = path.split(".")
    target: Any = event
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]
    del target[last]


BROKEN: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "a custom facet's field": (
        lambda e: set_in(e, "run.facets.sagemakerInstanceGroups.groups.0.instanceCount", -1),
        "run.facets.sagemakerInstanceGroups.groups[0].instanceCount: -1 is less than the minimum of 0",
    ),
    "a standard facet's required field": (
        lambda e: dropped(e, "run.facets.externalQuery.externalQueryId"),
        "run.facets.externalQuery: 'externalQueryId' is a required property",
    ),
    "a dataset facet's value": (
        lambda e: set_in(e, "inputs.0.inputFacets.sagemakerChannel.distribution", "Everywhere"),
        "inputs[0].inputFacets.sagemakerChannel.distribution: 'Everywhere' is not one of",
    ),
    "the run id's format": (
        lambda e: set_in(e, "run.runId", "manual__1"),
        "event.run.runId: 'manual__1' is not a 'uuid'",
    ),
    "a facet without its producer": (
        lambda e: dropped(e, "job.facets.sagemakerJobType._producer"),
        "job.facets.sagemakerJobType: '_producer' is a required property",
    ),
    "a facet whose schema is not vendored": (
        lambda e: set_in(e, "run.facets.tags._schemaURL", f"{SPEC}/facets/9-9-9/TagsRunFacet.json#/$defs/TagsRunFacet"),
        "run.facets.tags: no schema vendored for https://openlineage.io/spec/facets/9-9-9/TagsRunFacet.json",
    ),
}


@pytest.fixture
def complete_event(completing: MotoJobs, tmp_path: Path) -> dict[str, Any]:
    _, complete = emitted_run(tmp_path)
    return complete


@pytest.mark.parametrize("broken", list(BROKEN))
def test_an_event_that_breaks_a_schema_is_reported(complete_event: dict[str, Any], broken: str) -> None:
    event = copy.deepcopy(complete_event)
    breaks, expected = BROKEN[broken]
    breaks(event)
    problems = event_problems(event)
    assert any(expected in p for p in problems), problems
    assert event_problems(complete_event) == []  # the copy broke, not the original


def test_a_partly_written_last_line_is_left_for_the_next_read(tmp_path: Path) -> None:
    events = tmp_path / "openlineage.jsonl"
    assert read_events(events) == []
    events.write_text('{"eventType": "START"}\n{"eventType": "COMP', encoding="utf-8")
    assert read_events(events) == [{"eventType": "START"}]
    with events.open("a", encoding="utf-8") as more:
        more.write('LETE"}\n')
    assert [e["eventType"] for e in read_events(events)] == ["START", "COMPLETE"]
    events.write_text('{"eventType": "START"}{"eventType"\n', encoding="utf-8")
    with pytest.raises(AssertionError, match="line 1 is not one JSON event"):
        read_events(events)


def test_the_event_on_the_lineage_page_validates(complete_event: dict[str, Any]) -> None:
    """docs/lineage.md shows a COMPLETE of the system test, its facets' ``_producer`` cut: put back, it validates,
    and its run facets are ones the task's COMPLETE has (but ``airflow``, cut there too)."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "lineage.md").read_text(encoding="utf-8")
    (shown,) = [json.loads(b) for b in re.findall(r"^```json\n(.*?)^```", page, re.M | re.S) if '"eventType"' in b]
    for _, facet in facets_of(shown):
        facet["_producer"] = shown["producer"]
    assert event_problems(shown) == []
    assert set(shown["run"]["facets"]) <= set(complete_event["run"]["facets"])
    assert shown["run"]["facets"]["externalQuery"]["externalQueryId"].startswith("arn:aws:sagemaker:")
