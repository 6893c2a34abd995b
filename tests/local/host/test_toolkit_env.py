"""The SM_* environment and start-up lines, checked against the toolkit's real output (fixture)."""

from __future__ import annotations

import json
from pathlib import Path

from airflow_hetero.job.resource_config import GroupSpec
from airflow_hetero.local.host import toolkit_env
from airflow_hetero.local.training.layout import Cluster

FIXTURE = Path(__file__).parents[2] / "data" / "sagemaker-training-startup-algo-2.log"
# The request behind the fixture: what the SDK sent (every value JSON-encoded, in this order).
RAW_HPS = {
    "epochs": "10",
    "tf_data_mode": '"service"',
    "model_dir": '"/opt/ml/model"',
    "sagemaker_program": '"train.py"',
    "sagemaker_submit_directory": '"s3://bkt/src/sourcedir.tar.gz"',
    "sagemaker_container_log_level": "20",
    "sagemaker_distribution_instance_groups": '["dnn_group"]',
    "sagemaker_mpi_enabled": "true",
    "sagemaker_mpi_num_of_processes_per_host": "8",
    "sagemaker_mpi_custom_mpi_options": '"--NCCL_DEBUG WARN"',
}
DATA_CONFIG = {
    "train": {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"}
}


def _fixture_text() -> str:
    return FIXTURE.read_text(encoding="utf-8")


def _fixture_cluster() -> tuple[Cluster, dict[str, object]]:
    env = json.loads(_fixture_text().split("Training Env:")[1].split("Environment variables:")[0])
    groups = [GroupSpec("data_group", "ml.c5.18xlarge", 2), GroupSpec("dnn_group", "ml.p4d.24xlarge", 1)]
    from airflow_hetero.local.training.layout import Host

    hosts = [
        Host(f"algo-{n}", n, group, itype, f"127.0.1.{n}", Path("/opt/ml"))
        for n, group, itype in (
            (1, "dnn_group", "ml.p4d.24xlarge"),
            (2, "data_group", "ml.c5.18xlarge"),
            (3, "data_group", "ml.c5.18xlarge"),
        )
    ]
    cluster = Cluster(hosts, groups, {"data_group": ["algo-2", "algo-3"], "dnn_group": ["algo-1"]})
    return cluster, env


def _ours() -> tuple[dict[str, object], dict[str, str]]:
    cluster, _ = _fixture_cluster()
    resource = cluster.resource_config(cluster.hosts[1])
    env = toolkit_env.training_env(
        resource=resource,
        data_config=DATA_CONFIG,
        raw_hyperparameters=RAW_HPS,
        base_dir=Path("/opt/ml"),
        job_name=None,
        num_cpus=2,
    )
    return env, toolkit_env.env_vars(env)


def test_resource_config_matches_fixture() -> None:
    cluster, fixture_env = _fixture_cluster()
    ours = cluster.resource_config(cluster.hosts[1])
    assert ours == fixture_env["resource_config"]
    assert list(ours) == [
        "current_host",
        "current_instance_type",
        "current_group_name",
        "hosts",
        "instance_groups",
        "network_interface_name",
    ]


def test_training_env_matches_fixture() -> None:
    _, fixture_env = _fixture_cluster()
    env, _ = _ours()
    assert env == fixture_env
    assert list(env) == sorted(env)  # the toolkit dumps properties in sorted order


def test_env_var_lines_match_fixture_line_for_line() -> None:
    text = _fixture_text()
    expected = [line for line in text.splitlines() if line.startswith("SM_")]
    _, variables = _ours()
    assert [f"{k}={v}" for k, v in variables.items()] == expected


def test_startup_lines_have_one_event_per_variable() -> None:
    env, variables = _ours()
    lines = toolkit_env.startup_lines(env, variables, ["/usr/bin/python3", "--", "train.py"], "2026-11-30 03:08:00,666")
    assert lines[2] == "2026-11-30 03:08:00,666 sagemaker-training-toolkit INFO     Invoking user script"
    assert "SM_CURRENT_INSTANCE_GROUP=data_group" in lines
    assert "SM_CURRENT_HOST=algo-2" in lines
    assert lines[-2] == "/usr/bin/python3 -- train.py"
    block = lines[lines.index("Training Env:") + 2 : lines.index("Environment variables:") - 1]
    assert json.loads("\n".join(block)) == env


def test_distribution_defaults_to_current_group_when_a_strategy_is_on() -> None:
    cluster, _ = _fixture_cluster()
    hps = {"sagemaker_program": '"t.py"', "sagemaker_torch_distributed_enabled": "true"}
    env = toolkit_env.training_env(
        resource=cluster.resource_config(cluster.hosts[0]),
        data_config={},
        raw_hyperparameters=hps,
        base_dir=Path("/x"),
        job_name="j",
        num_cpus=1,
    )
    assert env["distribution_instance_groups"] == ["dnn_group"]
    assert env["master_hostname"] == "algo-1"
    assert env["is_master"] is True
    hps_plain = {"sagemaker_program": '"t.py"'}
    env = toolkit_env.training_env(
        resource=cluster.resource_config(cluster.hosts[2]),
        data_config={},
        raw_hyperparameters=hps_plain,
        base_dir=Path("/x"),
        job_name="j",
        num_cpus=1,
    )
    assert env["distribution_instance_groups"] == []
    assert env["master_hostname"] == "algo-1"  # first host overall when nothing is distributed
    assert env["is_master"] is False


def test_user_args_and_values_follow_the_toolkit() -> None:
    assert toolkit_env.user_args({"b": True, "a": [1, 2], "lr": 0.1, "d": {"y": 1, "x": 2}}) == [
        "-a",
        "[1, 2]",
        "-b",
        "True",
        "-d",
        "x=2,y=1",
        "--lr",
        "0.1",
    ]
    assert toolkit_env.format_value(True) == "true"
    assert toolkit_env.format_value(None) == ""
    assert toolkit_env.format_value({"b": 1, "a": "é"}) == '{"a":"\\u00e9","b":1}'
    assert toolkit_env.decode_hyperparameters({"a": "not json", "b": '"s"', "c": "3"}) == {
        "a": "not json",
        "b": "s",
        "c": 3,
    }
