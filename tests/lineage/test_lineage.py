"""OpenLineage facets (through the OpenLineage provider's own extraction path) and the model asset event."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any
from unittest.mock import MagicMock

import pytest
from support.example_jobs import example_job
from support.moto_jobs import ROLE, MotoJobs, mocked_jobs

from airflow_hetero._compat import AirflowFailException, Asset
from airflow_hetero.lineage.openlineage import s3_dataset_name
from airflow_hetero.operators import HeteroTrainingOperator
from airflow_hetero.sensors import HeteroTrainingSensor

JOB = example_job(
    "hetero-lineage",
    role=ROLE,
    output_path="s3://bucket/models",
    inputs={
        "raw": {"s3_data": "s3://raw-bucket/week/2026-11-22/", "instance_groups": ["data_group"]},
        "config": {"s3_data": "s3://bucket/config/features.json"},  # no groups: every group
    },
)
METRICS = [{"MetricName": "train:loss", "Value": 0.0125, "Timestamp": 1_700_000_000}]


@pytest.fixture
def jobs(monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoJobs]:
    with mocked_jobs(monkeypatch) as jobs:
        jobs.every_job = [
            {
                "status": "Completed",
                "secondary": "Completed",
                "final_metric_data_list": METRICS,
                "BillableTimeInSeconds": 1800,
            }
        ]
        yield jobs


class OutletEvents(defaultdict[Any, SimpleNamespace]):
    """Stands in for Airflow's outlet event accessors: ``events[asset].extra = {...}``."""

    def __init__(self) -> None:
        super().__init__(lambda: SimpleNamespace(extra={}))


def context(events: OutletEvents | None = None) -> dict[str, Any]:
    ti = MagicMock(dag_id="retrain", task_id="train", run_id="manual__1", map_index=-1)
    return {"ti": ti, "run_id": "manual__1", "outlet_events": events if events is not None else OutletEvents()}


def operator(**kwargs: Any) -> HeteroTrainingOperator:
    kwargs.setdefault("job", JOB)
    return HeteroTrainingOperator(
        task_id="train", aws_conn_id=None, deferrable=False, print_log=False, check_interval=0.01, **kwargs
    )


def extract(task: Any) -> Any:
    """What the OpenLineage listener collects after success: the provider's ExtractorManager."""
    from airflow.providers.openlineage.extractors.manager import ExtractorManager
    from airflow.utils.state import TaskInstanceState

    ti = MagicMock(task=task, task_id=task.task_id, dag_id="retrain", run_id="manual__1")
    dagrun = MagicMock(run_id="manual__1")
    return ExtractorManager().extract_metadata(
        dagrun=dagrun, task=task, task_instance_state=TaskInstanceState.SUCCESS, task_instance=ti
    )


def channel_facets(lineage: Any) -> dict[str, tuple[str, str, list[str]]]:
    found = {}
    for dataset in lineage.inputs:
        facet = dataset.inputFacets["sagemakerChannel"]
        found[facet.channelName] = (dataset.namespace, dataset.name, facet.instanceGroups)
    return found


def test_operator_lineage_every_channel_with_its_groups_and_the_model(jobs: MotoJobs) -> None:
    op = operator()
    result = op.execute(context())
    lineage = extract(op)
    assert channel_facets(lineage) == {
        "raw": ("s3://raw-bucket", "week/2026-11-22", ["data_group"]),
        "config": ("s3://bucket", "config/features.json", ["data_group", "dnn_group"]),
    }
    (output,) = lineage.outputs
    assert (output.namespace, output.name) == (
        "s3://bucket",
        f"models/{result['training_job_name']}/output/model.tar.gz",
    )
    # the custom facet serializes as an OpenLineage facet (producer and schema URL set)
    from openlineage.client.serde import Serde

    facet = Serde.to_dict(lineage.inputs[0].inputFacets["sagemakerChannel"])
    assert facet["channelName"] == "raw" and facet["instanceGroups"] == ["data_group"]
    assert facet["_producer"] and facet["_schemaURL"].startswith("https://")


def test_sensor_lineage_from_the_job_it_watched(jobs: MotoJobs) -> None:
    name = operator(wait_for_completion=False).execute(context())["training_job_name"]
    sensor = HeteroTrainingSensor(task_id="wait", job_name=name, aws_conn_id=None, poke_interval=0.01, timeout=5)
    sensor.execute(context())
    lineage = extract(sensor)
    assert set(channel_facets(lineage)) == {"raw", "config"}
    assert [o.name for o in lineage.outputs] == [f"models/{name}/output/model.tar.gz"]


def test_no_lineage_before_the_task_saw_its_job() -> None:
    assert operator().get_openlineage_facets_on_complete(MagicMock()) is None


PRICES = {"ml.c5.xlarge": 0.25, "ml.p3.2xlarge": 3.5}


def test_operator_fills_the_model_asset_event_extra(jobs: MotoJobs) -> None:
    events = OutletEvents()
    op = operator(model_asset="s3://bucket/models", prices=PRICES, use_pricing_api=False)
    assert [a.uri for a in op.outlets] == [Asset("s3://bucket/models").uri]  # declared at parse time
    result = op.execute(context(events))
    (asset,) = events
    assert asset.uri == op.model_asset.uri
    assert events[asset].extra == {
        "training_job_name": result["training_job_name"],
        "model_artifacts": f"s3://bucket/models/{result['training_job_name']}/output/model.tar.gz",
        "instance_groups": [
            {"name": "data_group", "type": "ml.c5.xlarge", "count": 2},
            {"name": "dnn_group", "type": "ml.p3.2xlarge", "count": 1},
        ],
        "final_metrics": {"train:loss": 0.0125},
        # half an hour billed of 2 x 0.25 + 1 x 3.5 per hour
        "cost": {
            "total": 2.0,
            "currency": "USD",
            "billable_seconds": 1800,
            "prices": {"ml.c5.xlarge": 0.25, "ml.p3.2xlarge": 3.5},
            "basis": "BillableTimeInSeconds x each group's instance count x its price per instance-hour",
        },
    }


def test_sensor_prices_the_run_in_another_currency(jobs: MotoJobs) -> None:
    name = operator(wait_for_completion=False).execute(context())["training_job_name"]
    events = OutletEvents()
    sensor = HeteroTrainingSensor(
        task_id="wait",
        job_name=name,
        aws_conn_id=None,
        poke_interval=0.01,
        timeout=5,
        model_asset="s3://bucket/models",
        prices={"ml.c5.xlarge": 0.2, "ml.p3.2xlarge": 3.0},
        currency="EUR",
    )
    sensor.execute(context(events))
    (extra,) = (e.extra for e in events.values())
    assert (extra["cost"]["total"], extra["cost"]["currency"]) == (1.7, "EUR")
    assert "reason" not in extra["cost"]


def test_the_run_cost_is_unknown_with_its_reason_when_a_group_has_no_price(jobs: MotoJobs) -> None:
    events = OutletEvents()
    op = operator(model_asset="s3://bucket/models", prices={"ml.c5.xlarge": 0.25}, use_pricing_api=False)
    op.execute(context(events))
    (extra,) = (e.extra for e in events.values())
    assert extra["cost"]["total"] is None
    assert extra["cost"]["prices"] == {"ml.c5.xlarge": 0.25, "ml.p3.2xlarge": None}
    assert extra["cost"]["reason"] == (
        "no price for ml.p3.2xlarge: prices= has none for it and the Pricing API was not asked"
    )
    assert extra["model_artifacts"]  # the rest of the event is there


def test_a_failing_price_lookup_leaves_the_cost_unknown_and_the_task_green(
    jobs: MotoJobs, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_hetero.hooks.training import HeteroTrainingHook

    def refuse(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("no region for the pricing client")

    monkeypatch.setattr(HeteroTrainingHook, "training_prices", refuse)
    events = OutletEvents()
    op = operator(model_asset="s3://bucket/models")
    op.execute(context(events))
    (extra,) = (e.extra for e in events.values())
    assert extra["cost"]["total"] is None
    assert "the price lookup failed (RuntimeError: no region for the pricing client)" in extra["cost"]["reason"]


def test_the_pricing_api_refusing_leaves_the_cost_unknown(jobs: MotoJobs) -> None:
    # moto answers GetProducts with an error: the Pricing API's failure is the reason, the task succeeds
    events = OutletEvents()
    op = operator(model_asset="s3://bucket/models", prices={"ml.p3.2xlarge": 3.5})
    op.execute(context(events))
    (extra,) = (e.extra for e in events.values())
    assert extra["cost"]["total"] is None
    assert extra["cost"]["reason"].startswith("no price for ml.c5.xlarge: the Pricing API failed")


def test_a_bad_price_fails_at_parse_time() -> None:
    with pytest.raises(ValueError, match="must be a price per instance-hour"):
        operator(model_asset="s3://bucket/models", prices={"ml.c5.xlarge": -1})


def test_model_asset_elsewhere_than_the_output_path_fails_without_retry(jobs: MotoJobs) -> None:
    events = OutletEvents()
    op = operator(model_asset=Asset("s3://other-bucket/models"))
    with pytest.raises(AirflowFailException, match="is not under the asset URI s3://other-bucket/models"):
        op.execute(context(events))
    assert dict(events) == {}


def test_a_stopped_job_accepted_as_success_emits_no_model(jobs: MotoJobs) -> None:
    jobs.every_job = [{"status": "Stopped", "secondary": "Stopped"}]
    events = OutletEvents()
    op = operator(model_asset="s3://bucket/models", fail_on_stopped=False)
    with pytest.raises(AirflowFailException, match="ended Stopped, so there is no model for asset"):
        op.execute(context(events))
    assert dict(events) == {}


def test_model_asset_needs_the_task_to_wait() -> None:
    with pytest.raises(ValueError, match="model_asset needs wait_for_completion=True"):
        operator(model_asset="s3://bucket/models", wait_for_completion=False)


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("s3://bucket/a/b/", ("s3://bucket", "a/b")),
        ("s3://bucket", ("s3://bucket", "/")),
        ("https://bucket.s3.us-east-1.amazonaws.com/key/x", ("s3://bucket", "key/x")),
        ("https://s3.us-east-1.amazonaws.com/bucket/key", ("s3://bucket", "key")),
        ("file:///opt/data", None),
        ("", None),
    ],
)
def test_s3_dataset_naming(uri: str, expected: tuple[str, str] | None) -> None:
    assert s3_dataset_name(uri) == expected
