"""Fallback instance types: the good forms, the argument's override, the accelerator fact (bad forms: rule_examples)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_hetero.definition.errors import JobDefinitionError
from airflow_hetero.definition.facts.instance_types import accelerator, is_gpu, training_instance_types
from airflow_hetero.definition.submittable import load_submittable

BASE: dict[str, Any] = yaml.safe_load((Path(__file__).parents[1] / "rule_examples.yaml").read_text())["base"]


def with_field(**lists: list[Any]) -> dict[str, Any]:
    job = copy.deepcopy(BASE)
    for group in job["instance_groups"]:
        if group["instance_group_name"] in lists:
            group["fallback_instance_types"] = lists[group["instance_group_name"]]
    return job


def test_both_forms_of_an_entry_and_their_counts() -> None:
    job = load_submittable(
        with_field(instance_group_2=["ml.p4d.24xlarge", {"instance_type": "ml.g5.48xlarge", "instance_count": 2}]),
        request=False,
    )
    assert job.fallbacks == {
        "instance_group_1": [],
        "instance_group_2": [("ml.p4d.24xlarge", 1), ("ml.g5.48xlarge", 2)],
    }
    request = job.build(job_name="j", region="us-east-1")
    assert "fallback" not in str(request)  # never sent: the service refuses members it does not know


def test_the_argument_replaces_the_lists_of_the_groups_it_names() -> None:
    job = with_field(instance_group_1=["ml.c6i.32xlarge"], instance_group_2=["ml.p4d.24xlarge"])
    loaded = load_submittable(job, request=False, fallbacks={"instance_group_2": ["ml.p5.48xlarge"]})
    assert loaded.fallbacks == {
        "instance_group_1": [("ml.c6i.32xlarge", 2)],
        "instance_group_2": [("ml.p5.48xlarge", 1)],
    }
    off = load_submittable(job, request=False, fallbacks={"instance_group_2": []})
    assert off.fallbacks["instance_group_2"] == []


def test_a_bad_definition_and_a_bad_argument_are_reported_together() -> None:
    job = {**with_field(), "volume_sise": 3}
    with pytest.raises(JobDefinitionError) as caught:
        load_submittable(job, request=False, fallbacks={"nope": ["ml.p5.48xlarge"]})
    assert [p.loc for p in caught.value.problems] == ["volume_sise", "fallback_instance_types.nope"]


def test_request_mode_takes_the_argument_for_its_groups() -> None:
    request = load_submittable(BASE, request=False).build(job_name="j", region="us-east-1")
    loaded = load_submittable(request, request=True, fallbacks={"instance_group_2": ["ml.p4d.24xlarge"]})
    assert loaded.fallbacks == {"instance_group_1": [], "instance_group_2": [("ml.p4d.24xlarge", 1)]}
    homogeneous = copy.deepcopy(request)
    homogeneous["ResourceConfig"] = {"InstanceType": "ml.c5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30}
    with pytest.raises(JobDefinitionError, match="fallback_instance_types: the job has no instance groups"):
        load_submittable(homogeneous, request=True, fallbacks={"instance_group_2": ["ml.p4d.24xlarge"]})


def test_the_accelerator_of_every_training_family_is_stated_once() -> None:
    kinds = {kind: accelerator(kind) for kind in training_instance_types()}
    assert {k for k, v in kinds.items() if v == "gpu"} == {k for k in kinds if k.split(".")[1][0] in "gp"}
    assert accelerator("ml.trn1.32xlarge") == "trainium" and accelerator("ml.c5.xlarge") == "cpu"
    assert is_gpu("ml.p4d.24xlarge") and not is_gpu("ml.trn1.32xlarge")
