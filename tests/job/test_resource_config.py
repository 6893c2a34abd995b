"""SageMaker's ResourceConfig and channel shapes, read once for every part (request or Describe alike)."""

from __future__ import annotations

import subprocess
import sys

from airflow_hetero.job.resource_config import (
    HOMOGENEOUS_GROUP,
    GroupSpec,
    channel_group_names,
    describe_groups,
    instance_groups,
    is_hetero,
    stated_groups,
    total_instances,
)
from airflow_hetero.runtime import HOMOGENEOUS_GROUP as TOOLKIT_NAME

HETERO = {
    "ResourceConfig": {
        "InstanceGroups": [
            {"InstanceGroupName": "data_group", "InstanceType": "ml.c5.xlarge", "InstanceCount": 2},
            {"InstanceGroupName": "dnn_group", "InstanceType": "ml.p3.2xlarge", "InstanceCount": 1},
        ],
        "VolumeSizeInGB": 30,
    }
}
HOMOGENEOUS = {"ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 3, "VolumeSizeInGB": 30}}
#: How long a fresh interpreter may take to import what the test checks (Airflow, on a loaded 2-core machine).
IMPORT_TIMEOUT = 120


def test_groups_of_a_heterogeneous_job_in_request_order() -> None:
    assert instance_groups(HETERO) == [
        GroupSpec("data_group", "ml.c5.xlarge", 2),
        GroupSpec("dnn_group", "ml.p3.2xlarge", 1),
    ]
    assert is_hetero(HETERO) and total_instances(HETERO) == 3
    assert describe_groups(instance_groups(HETERO)) == "data_group=2xml.c5.xlarge, dnn_group=1xml.p3.2xlarge"


def test_a_homogeneous_job_is_the_toolkits_one_group() -> None:
    assert HOMOGENEOUS_GROUP == TOOLKIT_NAME == "homogeneousCluster"
    assert instance_groups(HOMOGENEOUS) == [GroupSpec(HOMOGENEOUS_GROUP, "ml.m5.large", 3)]
    assert not is_hetero(HOMOGENEOUS) and total_instances(HOMOGENEOUS) == 3


def test_a_describe_with_zero_or_missing_counts_and_nothing_at_all() -> None:
    """DescribeTrainingJob of a heterogeneous job may report InstanceCount 0 or none at the top."""
    describe = {"ResourceConfig": {"InstanceCount": 0, "InstanceGroups": [{"InstanceGroupName": "a"}]}}
    assert instance_groups(describe) == [GroupSpec("a", None, 0)]
    assert total_instances(describe) == 0
    for nothing in (None, {}, {"ResourceConfig": {}}, {"ResourceConfig": None}):
        assert instance_groups(nothing) == [] and total_instances(nothing) == 0 and not is_hetero(nothing)


def test_a_channel_without_groups_goes_to_every_group() -> None:
    assigned = {"ChannelName": "train", "DataSource": {"S3DataSource": {"InstanceGroupNames": ["dnn_group"]}}}
    unassigned = {"ChannelName": "raw", "DataSource": {"S3DataSource": {"S3Uri": "s3://b/raw"}}}
    groups = ["data_group", "dnn_group"]
    assert channel_group_names(assigned, groups) == ["dnn_group"]
    assert channel_group_names(unassigned, groups) == groups
    assert channel_group_names({"ChannelName": "odd", "DataSource": None}, groups) == groups


def test_importing_it_loads_no_third_party_module() -> None:
    code = (
        "import sys; before = set(sys.modules); import airflow_hetero.job.resource_config\n"
        "new = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "print(sorted(new - {'airflow_hetero'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, timeout=IMPORT_TIMEOUT, capture_output=True, text=True
    ).stdout.strip()
    stdlib = set(sys.stdlib_module_names)
    assert all(name.lstrip("_") in stdlib or name in stdlib for name in eval(out)), out


def test_stated_groups_keep_what_the_answer_says() -> None:
    """The result dict's instance_groups: values untouched, None where the answer says nothing."""
    describe = {"ResourceConfig": {"InstanceGroups": [{"InstanceType": "ml.c5.xlarge", "InstanceCount": "2"}]}}
    assert stated_groups(describe) == [{"name": None, "type": "ml.c5.xlarge", "count": "2"}]
    assert stated_groups({"ResourceConfig": {"InstanceType": "ml.m5.large"}}) == [
        {"name": HOMOGENEOUS_GROUP, "type": "ml.m5.large", "count": None}
    ]
    assert stated_groups(HETERO)[1] == {"name": "dnn_group", "type": "ml.p3.2xlarge", "count": 1}
    assert stated_groups(None) == []
