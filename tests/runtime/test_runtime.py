"""airflow_hetero.runtime environment: side by side with sagemaker-training's Environment.

Every layout is written to a temporary SAGEMAKER_BASE_DIR; the toolkit reads the base dir when
it is imported, so it runs in a subprocess per layout, on the very same files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_hetero import runtime
from airflow_hetero.runtime import RuntimeConfigError, RuntimeEnvironment

PROPS = (
    "is_hetero",
    "current_host",
    "current_instance_group",
    "current_instance_group_hosts",
    "current_instance_type",
    "hosts",
    "instance_groups",
    "instance_groups_dict",
    "distribution_instance_groups",
    "distribution_hosts",
    "master_hostname",
    "is_master",
    "hyperparameters",
)

TOOLKIT_SCRIPT = """
import json, sys
from sagemaker_training import environment
env = environment.Environment()
with open(sys.argv[1], "w") as fh:
    json.dump({name: getattr(env, name) for name in sys.argv[2:]}, fh)
"""


def group(name: str, instance_type: str, hosts: list[str], **extra: Any) -> dict[str, Any]:
    return {"instance_group_name": name, "instance_type": instance_type, "hosts": hosts, **extra}


def sdk(**hps: Any) -> dict[str, str]:
    """Hyperparameters as the SageMaker Python SDK writes them: every value JSON-encoded."""
    return {k: json.dumps(v) for k, v in hps.items()}


DATA = group("data_group", "ml.c5.18xlarge", ["algo-2", "algo-3"])
DNN = group("dnn_group", "ml.p4d.24xlarge", ["algo-1"])


def hetero_rc(current: str, groups: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    hosts = sorted(h for g in groups for h in g["hosts"])
    mine = next(g for g in groups if current in g["hosts"])
    return {
        "current_host": current,
        "current_instance_type": mine["instance_type"],
        "current_group_name": mine["instance_group_name"],
        "hosts": hosts,
        "instance_groups": groups,
        "network_interface_name": "eth0",
        **extra,
    }


# The layout of /work/shared/fixtures/sagemaker-training-startup-algo-2.log.
FIXTURE_HPS = sdk(
    epochs=10,
    tf_data_mode="service",
    model_dir="/opt/ml/model",
    sagemaker_program="train.py",
    sagemaker_submit_directory="s3://bkt/src/sourcedir.tar.gz",
    sagemaker_distribution_instance_groups=["dnn_group"],
    sagemaker_mpi_enabled=True,
    sagemaker_mpi_num_of_processes_per_host=8,
    sagemaker_mpi_custom_mpi_options="--NCCL_DEBUG WARN",
)
ELEVEN = [f"algo-{i}" for i in range(1, 12)]

LAYOUTS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # heterogeneous, crossed numbering, distribution on the training group (as seen by each host)
    **{
        f"hetero-dist-dnn-{h}": (hetero_rc(h, [DATA, DNN]), FIXTURE_HPS)
        for h in ("algo-1", "algo-2", "algo-3")
    },
    # heterogeneous, no distribution: master is the job's first host
    "hetero-no-distribution": (hetero_rc("algo-3", [DATA, DNN]), sdk(epochs=3, sagemaker_program="t.py")),
    # distribution flag without instance groups: each group is its own distribution group
    **{
        f"hetero-flag-only-{h}": (hetero_rc(h, [DATA, DNN]), sdk(sagemaker_mpi_enabled=True))
        for h in ("algo-1", "algo-3")
    },
    # flags that are present but false enable nothing
    "hetero-flags-false": (
        hetero_rc("algo-2", [DATA, DNN]),
        sdk(sagemaker_mpi_enabled=False, sagemaker_pytorch_ddp_enabled=False),
    ),
    # three groups listed out of name order, distribution on two of them given in reverse order
    "three-groups-two-dist": (
        hetero_rc(
            "algo-3",
            [
                group("dnn_group", "ml.g5.xlarge", ["algo-4", "algo-1"]),
                group("data_group", "ml.c5.xlarge", ["algo-2"]),
                group("eval_group", "ml.m5.large", ["algo-3"]),
            ],
        ),
        sdk(
            sagemaker_distribution_instance_groups=["data_group", "dnn_group"],
            sagemaker_torch_distributed_enabled=True,
        ),
    ),
    # eleven hosts: lexicographic host order (algo-10 before algo-2), groups cross the numbering
    "eleven-hosts": (
        hetero_rc(
            "algo-10",
            [
                group("data_group", "ml.c5.xlarge", ["algo-10", "algo-2", "algo-7"]),
                group(
                    "dnn_group",
                    "ml.g5.xlarge",
                    [h for h in ELEVEN if h not in ("algo-10", "algo-2", "algo-7")],
                ),
            ],
        ),
        sdk(sagemaker_distribution_instance_groups=["data_group"]),
    ),
    # hosts not sorted in the file: neither side re-sorts
    "unsorted-hosts": (
        {
            **hetero_rc(
                "algo-1",
                [group("b", "ml.m5.large", ["algo-3", "algo-1"]), group("a", "ml.m5.large", ["algo-2"])],
            ),
            "hosts": ["algo-3", "algo-1", "algo-2"],
        },
        sdk(sagemaker_pytorch_ddp_enabled=True),
    ),
    # homogeneous job as SageMaker writes it today
    "homogeneous": (
        {
            "current_host": "algo-3",
            "current_instance_type": "ml.m5.xlarge",
            "current_group_name": "homogeneousCluster",
            "hosts": ["algo-1", "algo-2", "algo-3"],
            "instance_groups": [group("homogeneousCluster", "ml.m5.xlarge", ["algo-1", "algo-2", "algo-3"])],
            "network_interface_name": "eth0",
        },
        sdk(sagemaker_torch_distributed_enabled=True, lr=0.01),
    ),
    # older/legacy layout: no instance groups, no group name, no instance type
    "homogeneous-legacy": (
        {"current_host": "algo-2", "hosts": ["algo-1", "algo-2"]},
        sdk(sagemaker_mpi_enabled=True),
    ),
    "single-host": (
        {
            "current_host": "algo-1",
            "current_instance_type": "ml.m5.large",
            "current_group_name": "homogeneousCluster",
            "hosts": ["algo-1"],
            "instance_groups": [group("homogeneousCluster", "ml.m5.large", ["algo-1"])],
        },
        {},
    ),
    # the current group is not listed among the groups
    "group-not-listed": (
        {**hetero_rc("algo-2", [DATA, DNN]), "current_group_name": "ghost_group"},
        sdk(sagemaker_mpi_enabled=True),
    ),
    # hyperparameters that are not JSON strings, reserved toolkit keys, extra keys in groups
    "raw-hyperparameters": (
        hetero_rc("algo-1", [group("data_group", "ml.c5.xlarge", ["algo-2"], extra={"x": 1}), DNN]),
        {
            "sagemaker_program": "train.py",
            "sagemaker_region": '"us-east-1"',
            "_tuning_objective_metric": "loss",
            "default_user_module_name": "m",
            "name": "plain text",
            "lr": "0.1",
            "flag": "true",
            "epochs": 3,
            "nested": {"a": [1, 2]},
            "sagemaker_distribution_instance_groups": '["data_group"]',
            "sagemaker_mpi_enabled": True,
        },
    ),
}


def write_layout(base: Path, resource_config: dict[str, Any], hyperparameters: dict[str, Any] | None) -> Path:
    config = base / "input" / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "resourceconfig.json").write_text(json.dumps(resource_config))
    if hyperparameters is not None:
        (config / "hyperparameters.json").write_text(json.dumps(hyperparameters))
    (config / "inputdataconfig.json").write_text("{}")
    return base


def toolkit_view(base: Path) -> dict[str, Any]:
    """Properties of sagemaker_training's Environment() built on the files under ``base``."""
    out = base.parent / f"{base.name}-toolkit.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "AIRFLOW_HETERO_"))}
    env["SAGEMAKER_BASE_DIR"] = str(base)
    proc = subprocess.run(
        [sys.executable, "-c", TOOLKIT_SCRIPT, str(out), *PROPS],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def our_view(env: RuntimeEnvironment) -> dict[str, Any]:
    """Our properties in the toolkit's JSON shapes (tuples as lists, mappings as dicts)."""
    view: dict[str, Any] = json.loads(json.dumps({name: getattr(env, name) for name in PROPS}, default=dict))
    return view


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_same_answers_as_the_toolkit(tmp_path: Path, layout: str) -> None:
    resource_config, hps = LAYOUTS[layout]
    base = write_layout(tmp_path / "ml", resource_config, hps)
    expected = toolkit_view(base)
    assert our_view(RuntimeEnvironment.load(base)) == expected


def test_fixture_layout_matches_the_recorded_startup(tmp_path: Path) -> None:
    """The values the toolkit printed in the shared fixture for algo-2."""
    env = RuntimeEnvironment.load(write_layout(tmp_path, *LAYOUTS["hetero-dist-dnn-algo-2"]))
    assert env.is_hetero and not env.is_master
    assert env.current_instance_group == "data_group"
    assert env.current_instance_group_hosts == ("algo-2", "algo-3")
    assert env.current_instance_type == "ml.c5.18xlarge"
    assert env.hosts == ("algo-1", "algo-2", "algo-3")
    assert env.instance_groups == ("data_group", "dnn_group")
    assert env.distribution_instance_groups == ("dnn_group",)
    assert env.distribution_hosts == ("algo-1",)
    assert env.master_hostname == "algo-1"
    assert dict(env.hyperparameters) == {
        "epochs": 10,
        "tf_data_mode": "service",
        "model_dir": "/opt/ml/model",
    }
    assert env.instance_groups_dict["dnn_group"] == DNN
    assert env.group_hosts("data_group") == ("algo-2", "algo-3")
    assert env.base_dir == str(tmp_path)


def test_master_per_group_when_only_a_flag_is_set(tmp_path: Path) -> None:
    rc, hps = LAYOUTS["hetero-flag-only-algo-3"]
    env = RuntimeEnvironment.load(write_layout(tmp_path, rc, hps))
    assert env.distribution_instance_groups == ("data_group",)
    assert env.master_hostname == "algo-2"
    assert not env.is_master


def test_missing_hyperparameters_file_means_no_hyperparameters(tmp_path: Path) -> None:
    env = RuntimeEnvironment.load(write_layout(tmp_path, hetero_rc("algo-1", [DATA, DNN]), None))
    assert dict(env.hyperparameters) == {}
    assert env.distribution_instance_groups == ()
    assert env.master_hostname == "algo-1" and env.is_master


def test_bare_string_distribution_group_is_one_group(tmp_path: Path) -> None:
    """Deliberate difference: the toolkit would match group names as substrings of the string."""
    rc = hetero_rc(
        "algo-1", [group("dnn", "ml.g5.xlarge", ["algo-1"]), group("dnn_group", "ml.g5.xlarge", ["algo-2"])]
    )
    env = RuntimeEnvironment.load(
        write_layout(tmp_path, rc, {"sagemaker_distribution_instance_groups": "dnn_group"})
    )
    assert env.distribution_instance_groups == ("dnn_group",)
    assert env.distribution_hosts == ("algo-2",)


def test_snapshot_cannot_be_changed_through_its_attributes(tmp_path: Path) -> None:
    env = RuntimeEnvironment.load(write_layout(tmp_path, *LAYOUTS["homogeneous"]))
    env.instance_groups_dict["homogeneousCluster"]["hosts"].append("algo-9")
    assert env.instance_groups_dict["homogeneousCluster"]["hosts"] == ["algo-1", "algo-2", "algo-3"]
    with pytest.raises(TypeError):
        env.hyperparameters["lr"] = 1  # type: ignore[index]
    with pytest.raises(AttributeError):
        env.current_host = "algo-9"  # type: ignore[misc]


def test_group_hosts_unknown_group_names_the_known_ones(tmp_path: Path) -> None:
    env = RuntimeEnvironment.load(write_layout(tmp_path, hetero_rc("algo-1", [DATA, DNN]), {}))
    with pytest.raises(KeyError, match=r"'dnn_grp'.*data_group, dnn_group"):
        env.group_hosts("dnn_grp")


def test_environment_honours_sagemaker_base_dir_and_caches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = write_layout(tmp_path / "host", hetero_rc("algo-3", [DATA, DNN]), {})
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(base))
    first = runtime.environment()
    assert first.current_host == "algo-3" and first.base_dir == str(base)
    write_layout(base, hetero_rc("algo-2", [DATA, DNN]), {})
    assert runtime.environment() is first
    assert runtime.environment(reload=True).current_host == "algo-2"
    assert runtime.environment(base).current_host == "algo-2"


def test_missing_resourceconfig_names_path_and_where_it_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))
    with pytest.raises(RuntimeConfigError) as err:
        RuntimeEnvironment.load()
    msg = str(err.value)
    assert str(tmp_path / "input" / "config" / "resourceconfig.json") in msg
    assert "SageMaker training job" in msg and "offline endpoint" in msg
    assert f"SAGEMAKER_BASE_DIR={tmp_path}" in msg


def test_default_base_dir_is_opt_ml(monkeypatch: pytest.MonkeyPatch) -> None:
    if os.path.exists("/opt/ml/input/config/resourceconfig.json"):
        pytest.skip("running inside a SageMaker-style container")
    monkeypatch.delenv("SAGEMAKER_BASE_DIR", raising=False)
    with pytest.raises(
        RuntimeConfigError, match=r"/opt/ml/input/config/resourceconfig\.json not found.*default /opt/ml"
    ):
        RuntimeEnvironment.load()


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "is not valid JSON"),
        ("[]", "must hold a JSON object"),
        ('{"hosts": ["algo-1"]}', "'current_host' must be a non-empty string"),
        ('{"current_host": "algo-1"}', "'hosts' is missing"),
        ('{"current_host": "algo-1", "hosts": []}', "'hosts' is empty"),
        ('{"current_host": "algo-1", "hosts": "algo-1"}', "'hosts' must be a list"),
        ('{"current_host": "algo-1", "hosts": ["algo-1"], "current_group_name": 3}', "'current_group_name'"),
        (
            '{"current_host": "algo-1", "hosts": ["algo-1"], "instance_groups": {}}',
            "'instance_groups' must be a list",
        ),
        (
            '{"current_host": "a", "hosts": ["a"], "instance_groups": [{"hosts": ["a"]}]}',
            r"instance_groups\[0\]\.instance_group_name",
        ),
        (
            '{"current_host": "a", "hosts": ["a"], "instance_groups": [{"instance_group_name": "g"}]}',
            r"instance_groups\[0\]\.hosts",
        ),
    ],
)
def test_invalid_resourceconfig(tmp_path: Path, content: str, expected: str) -> None:
    config = tmp_path / "input" / "config"
    config.mkdir(parents=True)
    (config / "resourceconfig.json").write_text(content)
    with pytest.raises(RuntimeConfigError, match=expected) as err:
        RuntimeEnvironment.load(tmp_path)
    assert str(config / "resourceconfig.json") in str(err.value)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{oops", "is not valid JSON"),
        ('["a"]', "must hold a JSON object"),
        ('{"sagemaker_distribution_instance_groups": "[1, 2]"}', "must be a list of non-empty strings"),
        ('{"sagemaker_distribution_instance_groups": "null"}', "must be a list of non-empty strings"),
    ],
)
def test_invalid_hyperparameters(tmp_path: Path, content: str, expected: str) -> None:
    write_layout(tmp_path, hetero_rc("algo-1", [DATA, DNN]), None)
    (tmp_path / "input" / "config" / "hyperparameters.json").write_text(content)
    with pytest.raises(RuntimeConfigError, match=expected) as err:
        RuntimeEnvironment.load(tmp_path)
    assert "hyperparameters.json" in str(err.value)
