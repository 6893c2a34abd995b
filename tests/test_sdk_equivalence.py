"""The request builder against golden requests captured from the SageMaker Python SDK v2.

``tests/sdk_cases/*.request.json`` were recorded from the real SDK (2.257.7) by
``tests/sdk_cases/generate.py``. The builder must produce the same request, except for the
two documented differences, which are applied to the SDK's request here explicitly.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_hetero.request import build_training_request
from airflow_hetero.spec import load_job

CASES = Path(__file__).parent / "sdk_cases"
#: Cases whose definition leaves output_path to the SDK's default bucket (needs an AWS call).
NEEDS_DEFAULT_BUCKET = {"i_local_source_dir"}


def _cases() -> list[str]:
    return sorted(p.name.removesuffix(".request.json") for p in CASES.glob("*.request.json"))


def _load(case: str) -> tuple[dict[str, Any], dict[str, Any]]:
    meta = yaml.safe_load((CASES / f"{case}.yaml").read_text())
    expected = json.loads((CASES / f"{case}.request.json").read_text())
    return meta, expected


def _apply_documented_differences(job_def: dict[str, Any], sdk: dict[str, Any]) -> dict[str, Any]:
    """What the SDK would send if it did not break heterogeneous jobs (docs/request.md)."""
    want = copy.deepcopy(sdk)
    groups = [g["instance_group_name"] for g in job_def.get("instance_groups") or []]
    channels = want.get("InputDataConfig", [])
    if groups and any("InstanceGroupNames" in c["DataSource"]["S3DataSource"] for c in channels):
        for channel in channels:
            channel["DataSource"]["S3DataSource"].setdefault("InstanceGroupNames", list(groups))
    dist = job_def.get("distribution") or {}
    if groups and "torch_distributed" in dist:
        named = dist.get("instance_groups") or groups[:1]
        want["HyperParameters"]["sagemaker_distribution_instance_groups"] = json.dumps(named)
    return want


@pytest.mark.parametrize("case", [c for c in _cases() if c not in NEEDS_DEFAULT_BUCKET])
def test_request_equals_sdk(case: str) -> None:
    meta, sdk = _load(case)
    job = load_job(meta["job"])
    got = build_training_request(job, job_name=meta["job_name"], region=meta.get("region", "us-west-2"))
    assert got == _apply_documented_differences(meta["job"], sdk)


def test_default_bucket_case_is_refused_with_a_pointer_to_output_path() -> None:
    meta, _ = _load("i_local_source_dir")
    with pytest.raises(ValueError, match="output_path: field required"):
        load_job(meta["job"])


def test_sdk_crash_case_builds_the_request_the_sdk_meant() -> None:
    """f2: the SDK raises TypeError for hetero + checkpoint_local_path; we turn the debugger off."""
    meta = yaml.safe_load((CASES / "f2_checkpoint_local_path_crash.yaml").read_text())
    job = load_job(meta["job"])
    got = build_training_request(job, job_name=meta["job_name"], region="us-west-2")
    assert got["CheckpointConfig"] == {
        "S3Uri": meta["job"]["checkpoint_s3_uri"],
        "LocalPath": meta["job"]["checkpoint_local_path"],
    }
    assert "DebugHookConfig" not in got


def test_every_golden_case_is_exercised() -> None:
    yamls = {p.stem for p in CASES.glob("*.yaml")}
    covered = set(_cases()) | {"f2_checkpoint_local_path_crash"}
    assert yamls == covered
