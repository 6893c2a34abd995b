"""The request builder and the rules against the real SageMaker Python SDK v2.

``tests/sdk_cases/`` was recorded from the SDK (2.257.7) by ``tests/sdk_cases/generate.py``:
``<case>.request.json`` is what the SDK sent, ``<case>.error.json`` what it raised. The
builder must produce the same request, except for the two documented differences, which are
applied to the SDK's request here explicitly. What the SDK refuses, the definition refuses
too, with the ``problems`` listed in the case; the few cases the SDK accepts but
airflow-hetero refuses on purpose list their ``problems`` as well (docs/request.md).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_hetero.definition.builder import definition_request
from airflow_hetero.definition.builder.definition_request import build_training_request
from airflow_hetero.definition.facts import instance_types
from airflow_hetero.definition.job import JobDefinitionError, load_job
from airflow_hetero.definition.rules import distribution

CASES = Path(__file__).parents[1] / "sdk_cases"
#: Cases whose definition leaves output_path to the SDK's default bucket (needs an AWS call).
NEEDS_DEFAULT_BUCKET = {"i_local_source_dir"}
#: SDK crashes on definitions it means to accept: the request the SDK meant is checked by hand.
SDK_CRASHES = {"f2_checkpoint_local_path_crash"}


def _meta(case: str) -> dict[str, Any]:
    meta: dict[str, Any] = yaml.safe_load((CASES / f"{case}.yaml").read_text())
    return meta


def _stems(suffix: str) -> list[str]:
    return sorted(p.name.removesuffix(suffix) for p in CASES.glob(f"*{suffix}"))


def _accepted() -> list[str]:
    """Cases the SDK accepted and airflow-hetero accepts as well."""
    return [c for c in _stems(".request.json") if c not in NEEDS_DEFAULT_BUCKET and "problems" not in _meta(c)]


def _load(case: str) -> tuple[dict[str, Any], dict[str, Any]]:
    expected = json.loads((CASES / f"{case}.request.json").read_text())
    return _meta(case), expected


def _problems(definition: dict[str, Any]) -> list[list[str]]:
    with pytest.raises(JobDefinitionError) as err:
        load_job(definition)
    return [[p.loc, p.msg] for p in err.value.problems]


def _apply_documented_differences(job_def: dict[str, Any], sdk: dict[str, Any]) -> dict[str, Any]:
    """What the SDK would send if it did not break heterogeneous jobs (docs/request.md)."""
    want = copy.deepcopy(sdk)
    groups = [g["instance_group_name"] for g in job_def.get("instance_groups") or []]
    channels = want.get("InputDataConfig", [])
    if groups and any("InstanceGroupNames" in c["DataSource"]["S3DataSource"] for c in channels):
        for channel in channels:
            channel["DataSource"]["S3DataSource"].setdefault("InstanceGroupNames", list(groups))
    dist = job_def.get("distribution") or {}
    if groups and (dist.get("torch_distributed") or {}).get("enabled") is True:
        named = dist.get("instance_groups") or groups[:1]
        want["HyperParameters"]["sagemaker_distribution_instance_groups"] = json.dumps(named)
    return want


@pytest.mark.parametrize("case", _accepted())
def test_request_equals_sdk(case: str) -> None:
    meta, sdk = _load(case)
    job = load_job(meta["job"])
    got = build_training_request(job, job_name=meta["job_name"], region=meta.get("region", "us-west-2"))
    assert got == _apply_documented_differences(meta["job"], sdk)


@pytest.mark.parametrize("case", [c for c in _stems(".error.json") if c not in SDK_CRASHES])
def test_what_the_sdk_refuses_is_refused(case: str) -> None:
    meta = _meta(case)
    assert meta.get("expect_error") is True
    assert _problems(meta["job"]) == meta["problems"]


@pytest.mark.parametrize("case", [c for c in _stems(".request.json") if "problems" in _meta(c)])
def test_stricter_than_the_sdk_on_purpose(case: str) -> None:
    """The SDK sends these; the job would fail or run something else, so the definition is refused."""
    assert _problems(_meta(case)["job"]) == _meta(case)["problems"]


def test_default_bucket_case_is_refused_with_a_pointer_to_output_path() -> None:
    meta, _ = _load("i_local_source_dir")
    with pytest.raises(ValueError, match="output_path: field required"):
        load_job(meta["job"])


def test_sdk_crash_case_builds_the_request_the_sdk_meant() -> None:
    """f2: the SDK raises TypeError for hetero + checkpoint_local_path; we turn the debugger off."""
    meta = _meta("f2_checkpoint_local_path_crash")
    job = load_job(meta["job"])
    got = build_training_request(job, job_name=meta["job_name"], region="us-west-2")
    assert got["CheckpointConfig"] == {
        "S3Uri": meta["job"]["checkpoint_s3_uri"],
        "LocalPath": meta["job"]["checkpoint_local_path"],
    }
    assert "DebugHookConfig" not in got


def test_every_golden_case_is_exercised() -> None:
    yamls = {p.stem for p in CASES.glob("*.yaml")}
    recorded = set(_stems(".request.json")) | set(_stems(".error.json"))
    assert yamls == recorded
    for case in _stems(".error.json"):
        assert "problems" in _meta(case) or case in SDK_CRASHES, case


def test_copied_sdk_lists_equal_the_sdks() -> None:
    """generate.py records the SDK's lists in sdk_constants.json; the copies must not drift."""
    sdk = json.loads((CASES / "sdk_constants.json").read_text())
    copies = {
        "SM_DATAPARALLEL_SUPPORTED_FRAMEWORK_VERSIONS": {
            k: list(v) for k, v in distribution.SMDDP_FRAMEWORK_VERSIONS.items()
        },
        "TORCH_DISTRIBUTED_GPU_SUPPORTED_FRAMEWORK_VERSIONS": list(distribution.TORCH_DISTRIBUTED_GPU_VERSIONS),
        "TRAINIUM_SUPPORTED_TORCH_DISTRIBUTED_FRAMEWORK_VERSIONS": list(
            distribution.TORCH_DISTRIBUTED_TRAINIUM_VERSIONS
        ),
        "UNSUPPORTED_DLC_IMAGE_FOR_SM_PARALLELISM": list(distribution.SMDISTRIBUTED_UNSUPPORTED_IMAGES),
        "SM_DATAPARALLEL_SUPPORTED_INSTANCE_TYPES": sorted(instance_types.SMDDP_INSTANCE_TYPES | {"local_gpu"}),
        "DEBUGGER_UNSUPPORTED_REGIONS": sorted(definition_request.DEBUGGER_UNSUPPORTED_REGIONS),
        "PROFILER_UNSUPPORTED_REGIONS": sorted(definition_request.PROFILER_UNSUPPORTED_REGIONS),
    }
    for name in (
        "SM_DATAPARALLEL_SUPPORTED_INSTANCE_TYPES",
        "DEBUGGER_UNSUPPORTED_REGIONS",
        "PROFILER_UNSUPPORTED_REGIONS",
    ):
        sdk[name] = sorted(sdk[name])
    assert {name: sdk[name] for name in copies} == copies


@pytest.mark.parametrize(
    ("distribution", "problem"),
    [
        ({"mpi": {"enabled": True}, "smdistributed": {"modelparallel": {"enabled": True}}}, None),
        ({"smdistributed": {"dataparallel": {"enabled": True}}, "torch_distributed": {"enabled": True}}, None),
        ({"torch_distributed": {"enabled": True}, "mpi": {"enabled": True}}, None),
        ({"mpi": {"enabled": False}}, "distribution"),
        (
            {"torch_distributed": {"enabled": True}, "smdistributed": {"dataparallel": {"enabled": False}}},
            "distribution",
        ),
    ],
)
def test_launcher_rule_on_a_heterogeneous_job(distribution: dict[str, Any], problem: str | None) -> None:
    """The combinations the SDK runs on one instance group, and two it refuses."""
    meta = _meta("a_docs_cluster_pytorch_mpi")
    job = copy.deepcopy(meta["job"])
    job.update(framework_version="2.0.1", py_version="py310")
    job["image_uri"] = "123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer:1"
    job["distribution"] = {**distribution, "instance_groups": meta["job"]["distribution"]["instance_groups"]}
    if problem is None:
        load_job(job)
    else:
        assert [loc for loc, _ in _problems(job)] == [problem]
