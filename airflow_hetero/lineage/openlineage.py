"""OpenLineage datasets of a training job: every S3 channel (with its instance groups) in, the model out (typed
``MODEL``), with the run and job facets of :mod:`~airflow_hetero.lineage.run_facets`.

Built from the result dict of the job (``job.outcome.result_dict``: ``input_channels`` and
``model_artifacts`` come from DescribeTrainingJob), so the operator and the sensor report the same
lineage. The OpenLineage client classes are imported when lineage is asked for: only the
OpenLineage provider's listener calls this, and only when that provider is installed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

    from airflow_hetero.pricing.billing import BilledCost

#: The custom channel facet's JSON schema, in the package (and the wheel).
CHANNEL_FACET_SCHEMA_FILE = Path(__file__).parent / "schemas" / "SageMakerChannelInputDatasetFacet.json"
#: Its ``$id``, with the pointer to the facet's definition: the facet's ``_schemaURL``.
CHANNEL_FACET_SCHEMA = (
    "https://pypi.org/project/airflow-hetero/lineage/schemas/SageMakerChannelInputDatasetFacet.json"
    "#/$defs/SageMakerChannelInputDatasetFacet"
)


def s3_dataset_name(uri: str) -> tuple[str, str] | None:
    """OpenLineage naming for S3: namespace ``s3://<bucket>``, name the key (``/`` for the bucket)."""
    parsed = urlparse(uri)
    if parsed.scheme not in ("s3", "https") or not parsed.netloc:
        return None
    if parsed.scheme == "https":  # https://<bucket>.s3.<region>.amazonaws.com/<key> or path style
        host = parsed.netloc.split(".s3", 1)
        if len(host) == 2 and host[0]:
            return f"s3://{host[0]}", parsed.path.lstrip("/").rstrip("/") or "/"
        bucket, _, key = parsed.path.lstrip("/").partition("/")
        return (f"s3://{bucket}", key.rstrip("/") or "/") if bucket else None
    return f"s3://{parsed.netloc}", parsed.path.lstrip("/").rstrip("/") or "/"


def training_lineage(
    result: dict[str, Any],
    *,
    identity_tags: list[dict[str, str]] | None = None,
    cost: BilledCost | None = None,
    failed: bool = False,
) -> OperatorLineage[Any, Any]:
    """Inputs: each S3 channel with a ``sagemakerChannel`` facet (channel, instance groups); output: the model,
    typed ``MODEL`` (none when the job ``failed``); the run and job facets that name the job
    (:mod:`~airflow_hetero.lineage.run_facets`)."""
    import attr
    from airflow.providers.common.compat.openlineage.facet import InputDataset, OutputDataset
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.facet_v2 import dataset_type_dataset
    from openlineage.client.generated.base import InputDatasetFacet

    from airflow_hetero.lineage.run_facets import job_facets, run_facets

    @attr.define
    class SageMakerChannelInputDatasetFacet(InputDatasetFacet):
        """Which channel of the job read this dataset, and which instance groups receive it."""

        channelName: str
        instanceGroups: list[str]
        distribution: str | None = None

        @staticmethod
        def _get_schema() -> str:
            return CHANNEL_FACET_SCHEMA

    inputs = []
    for channel in result.get("input_channels") or []:
        named = s3_dataset_name(str(channel.get("s3_uri") or ""))
        if named is None:
            continue  # not S3 (file system or FSx channels): no OpenLineage S3 dataset
        facet = SageMakerChannelInputDatasetFacet(
            channelName=str(channel.get("channel")),
            instanceGroups=[str(g) for g in channel.get("instance_groups") or []],
            distribution=channel.get("distribution"),
        )
        inputs.append(InputDataset(namespace=named[0], name=named[1], inputFacets={"sagemakerChannel": facet}))
    outputs = []
    artifact = None if failed else s3_dataset_name(str(result.get("model_artifacts") or ""))
    if artifact is not None:
        model = dataset_type_dataset.DatasetTypeDatasetFacet(datasetType="MODEL")
        outputs.append(OutputDataset(namespace=artifact[0], name=artifact[1], facets={"datasetType": model}))
    return OperatorLineage(
        inputs=inputs,
        outputs=outputs,
        run_facets=run_facets(result, identity_tags or [], cost),
        job_facets=job_facets(),
    )
