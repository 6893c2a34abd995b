"""OpenLineage facets that name the SageMaker job a task ran, on complete and on failure (docs/lineage.md).

Run facets: ``externalQuery`` (the job's ARN as the external id, source ``sagemaker``), ``sagemakerProcessingEngine``
(a ``ProcessingEngineRunFacet``: Amazon SageMaker Training and its API version), ``tags`` (the job's identity tags,
:mod:`airflow_hetero.job.identity`) and ``sagemakerInstanceGroups`` (each group's type, count, billed seconds and
cost; its JSON schema ships in the package, :data:`INSTANCE_GROUPS_SCHEMA_FILE`). Job facet: ``sagemakerJobType``
(a ``JobTypeJobFacet``: BATCH, integration SAGEMAKER, job type TRAINING_JOB). The processing engine and the job type
are the standard facets under their own names: the OpenLineage provider writes Airflow's own under
``processing_engine`` and ``jobType`` after the task's. Built from the result dict of the job
(``job.outcome.result_dict``) and its cost (``pricing.billing.billed_cost``); the OpenLineage client classes are
imported when lineage is asked for.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_hetero.pricing.billing import BilledCost

#: The facet's JSON schema, in the package (and the wheel).
INSTANCE_GROUPS_SCHEMA_FILE = Path(__file__).parent / "schemas" / "SageMakerInstanceGroupsRunFacet.json"
#: Its ``$id``, with the pointer to the facet's definition: the facet's ``_schemaURL``.
INSTANCE_GROUPS_SCHEMA_URL = (
    "https://pypi.org/project/airflow-hetero/lineage/schemas/SageMakerInstanceGroupsRunFacet.json"
    "#/$defs/SageMakerInstanceGroupsRunFacet"
)
#: SageMaker's API version (botocore's ``sagemaker`` model): the processing engine's version.
SAGEMAKER_API_VERSION = "2017-07-24"
ENGINE_NAME = "Amazon SageMaker Training"


@functools.cache
def _instance_groups_facet_class() -> Any:
    """The custom facet's class, built once (attrs compiles its methods)."""
    import attr
    from openlineage.client.generated.base import RunFacet

    @attr.define
    class SageMakerInstanceGroupsRunFacet(RunFacet):
        """The job's instance groups: type, count, billed seconds, cost."""

        trainingJobName: str
        groups: list[dict[str, Any]]
        totalCost: float | None
        currency: str

        @staticmethod
        def _get_schema() -> str:
            return INSTANCE_GROUPS_SCHEMA_URL

    return SageMakerInstanceGroupsRunFacet


def group_costs(result: Mapping[str, Any], cost: BilledCost | None) -> list[dict[str, Any]]:
    """Each group of the job: name, type, count, billed instance-seconds, price per hour and cost (pure)."""
    from airflow_hetero.pricing.billing import money

    billable = result.get("billable_seconds")
    prices: Mapping[str, Any] = {} if cost is None else cost["prices"]
    out = []
    for group in result.get("instance_groups") or []:
        count = int(group.get("count") or 0)
        price = prices.get(str(group.get("type")))
        billed = None if billable is None else float(billable) * count
        out.append(
            {
                "name": group.get("name"),
                "instanceType": group.get("type"),
                "instanceCount": count,
                "billedSeconds": billed,
                "pricePerHour": price,
                "cost": None if billed is None or price is None else money(billed * float(price) / 3600),
            }
        )
    return out


def job_facets() -> dict[str, Any]:
    """The job facets: the SageMaker job's type."""
    from openlineage.client.facet_v2 import job_type_job

    return {
        "sagemakerJobType": job_type_job.JobTypeJobFacet(
            processingType="BATCH", integration="SAGEMAKER", jobType="TRAINING_JOB"
        )
    }


def run_facets(
    result: Mapping[str, Any], identity_tags: list[dict[str, str]], cost: BilledCost | None
) -> dict[str, Any]:
    """The run facets naming the job (its ARN, engine, identity tags, instance groups); {} without an ARN."""
    from openlineage.client.facet_v2 import external_query_run, processing_engine_run, tags_run

    from airflow_hetero import __version__
    from airflow_hetero.pricing.settings import PRICE_LIST_CURRENCY

    arn = result.get("training_job_arn")
    if not arn:
        return {}
    facet_class = _instance_groups_facet_class()
    priced: Mapping[str, Any] = dict(cost) if cost is not None else {}
    return {
        "externalQuery": external_query_run.ExternalQueryRunFacet(externalQueryId=str(arn), source="sagemaker"),
        "sagemakerProcessingEngine": processing_engine_run.ProcessingEngineRunFacet(
            version=SAGEMAKER_API_VERSION, name=ENGINE_NAME, openlineageAdapterVersion=__version__
        ),
        "tags": tags_run.TagsRunFacet(
            tags=[tags_run.TagsRunFacetFields(t["Key"], t["Value"], "SAGEMAKER") for t in identity_tags]
        ),
        "sagemakerInstanceGroups": facet_class(
            trainingJobName=str(result.get("training_job_name")),
            groups=group_costs(result, cost),
            totalCost=priced.get("total"),
            currency=str(priced.get("currency") or PRICE_LIST_CURRENCY),
        ),
    }
