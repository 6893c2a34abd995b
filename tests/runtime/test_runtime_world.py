"""The distribution on one instance group: distribution_world() and ``python -m runtime world|torchrun-args|torchrun``.

The command line is run from a copy of the runtime folder (the documented way to use it in a
container without the package); ``torchrun`` there is a stand-in on PATH that records its arguments
(the real one runs in tests/local/test_sagemaker_sdk3.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_hetero import runtime
from airflow_hetero.runtime import DISTRIBUTION_GROUP_ENV, RuntimeConfigError, distribution_world

ADDRESSES = {"algo-1": "127.0.9.1", "algo-2": "127.0.9.2", "algo-3": "127.0.9.3", "algo-4": "127.0.9.4"}
# v3 would put all four hosts in one world with its master on algo-1, a CPU host here
GROUPS = [
    {"instance_group_name": "data", "instance_type": "ml.c5.xlarge", "hosts": ["algo-1", "algo-4"]},
    {"instance_group_name": "dnn", "instance_type": "ml.p4d.24xlarge", "hosts": ["algo-3", "algo-2"]},
]


def layout(base: Path, current: str, hyperparameters: dict[str, str] | None = None) -> Path:
    group = next(g for g in GROUPS if current in g["hosts"])
    config = {
        "current_host": current,
        "current_instance_type": group["instance_type"],
        "current_group_name": group["instance_group_name"],
        "hosts": sorted(ADDRESSES),
        "instance_groups": GROUPS,
        "network_interface_name": "eth0",
    }
    folder = base / current / "input" / "config"
    folder.mkdir(parents=True)
    (folder / "resourceconfig.json").write_text(json.dumps(config))
    (folder / "hyperparameters.json").write_text(json.dumps(hyperparameters or {}))
    return base / current


@pytest.fixture(autouse=True)
def _addresses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(runtime.HOST_ADDRESSES_ENV, json.dumps(ADDRESSES))
    monkeypatch.delenv(DISTRIBUTION_GROUP_ENV, raising=False)


def test_the_world_of_one_group_has_its_master_on_that_group(tmp_path: Path) -> None:
    env = runtime.RuntimeEnvironment.load(layout(tmp_path, "algo-2"))
    world = distribution_world("dnn", env=env)
    assert (world.hosts, world.master_host, world.master_addr) == (("algo-3", "algo-2"), "algo-3", "127.0.9.3")
    assert (world.node_rank, world.nnodes, world.world_size(8)) == (1, 2, 16)
    assert world.torchrun_args(4) == [
        "--nnodes=2",
        "--node_rank=1",
        "--nproc_per_node=4",
        "--master_addr=127.0.9.3",
        "--master_port=29500",
    ]
    assert world.mpi_hosts(8) == "algo-3:8,algo-2:8"


def test_a_host_outside_the_group_takes_no_part(tmp_path: Path) -> None:
    world = distribution_world("dnn", env=runtime.RuntimeEnvironment.load(layout(tmp_path, "algo-1")))
    assert world.node_rank is None and world.as_dict()["node_rank"] is None
    with pytest.raises(
        RuntimeConfigError, match=r"host algo-1 is not in distribution group 'dnn' \(its hosts: algo-3, algo-2\)"
    ):
        world.torchrun_args()


def test_the_group_comes_from_the_environment_or_the_sdk_hyperparameter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hps = {"sagemaker_distribution_instance_groups": json.dumps(["dnn"])}
    env = runtime.RuntimeEnvironment.load(layout(tmp_path, "algo-3", hps))
    assert distribution_world(env=env).group == "dnn"
    plain = runtime.RuntimeEnvironment.load(layout(tmp_path / "b", "algo-3"))
    with pytest.raises(
        RuntimeConfigError, match=f"name the distribution group .*{DISTRIBUTION_GROUP_ENV}.*are data, dnn"
    ):
        distribution_world(env=plain)
    monkeypatch.setenv(DISTRIBUTION_GROUP_ENV, "data")
    assert distribution_world(env=plain).hosts == ("algo-1", "algo-4")
    with pytest.raises(RuntimeConfigError, match="unknown instance group 'gpu'; the job's groups are: data, dnn"):
        distribution_world("gpu", env=plain)


def _cli(tmp_path: Path, host: str, *args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``python -m runtime ARGS`` from a copy of the runtime folder, on ``host``, a recording torchrun on PATH."""
    copy = tmp_path / "code" / "runtime"
    if not copy.exists():
        shutil.copytree(Path(runtime.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
        (copy.parent / "train.py").write_text("import sys; print('plain python', sys.argv[1:])\n")
        fake = tmp_path / "bin" / "torchrun"
        fake.parent.mkdir()
        fake.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {tmp_path}/torchrun-args\n")
        fake.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
        runtime.BASE_DIR_ENV: str(
            layout(tmp_path / "hosts", host) if not (tmp_path / "hosts" / host).exists() else tmp_path / "hosts" / host
        ),
        runtime.HOST_ADDRESSES_ENV: json.dumps(ADDRESSES),
    }
    env.pop("PYTHONPATH", None)  # the copy alone, no package
    done = subprocess.run(
        [sys.executable, "-m", "runtime", *args],
        cwd=copy.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return done, tmp_path / "torchrun-args"


def test_world_and_torchrun_args_from_a_copy_of_the_folder(tmp_path: Path) -> None:
    done, _ = _cli(tmp_path, "algo-3", "world", "--group", "dnn", "--master-port", "7000")
    assert done.returncode == 0, done.stderr
    world: dict[str, Any] = json.loads(done.stdout)
    assert world == {
        "group": "dnn",
        "hosts": ["algo-3", "algo-2"],
        "current_host": "algo-3",
        "node_rank": 0,
        "nnodes": 2,
        "master_host": "algo-3",
        "master_addr": "127.0.9.3",
        "master_port": 7000,
    }
    done, _ = _cli(tmp_path, "algo-3", "torchrun-args", "--group", "dnn")
    assert done.stdout.split() == [
        "--nnodes=2",
        "--node_rank=0",
        "--nproc_per_node=1",
        "--master_addr=127.0.9.3",
        "--master_port=29500",
    ]
    done, _ = _cli(tmp_path, "algo-1", "torchrun-args", "--group", "dnn")
    assert done.returncode == 3 and "algo-1 is not in group dnn" in done.stderr
    done, _ = _cli(tmp_path, "algo-1", "world", "--group", "nope")
    assert done.returncode == 2 and "unknown instance group 'nope'" in done.stderr


def test_torchrun_launches_on_the_group_and_plain_python_elsewhere(tmp_path: Path) -> None:
    done, recorded = _cli(
        tmp_path, "algo-2", "torchrun", "--group", "dnn", "--nproc-per-node", "2", "--", "train.py", "--lr", "0.1"
    )
    assert done.returncode == 0, done.stderr
    assert "[airflow-hetero] host=algo-2 group=dnn instance_type=ml.p4d.24xlarge" in done.stdout.splitlines()
    assert recorded.read_text().split() == [
        "--nnodes=2",
        "--node_rank=1",
        "--nproc_per_node=2",
        "--master_addr=127.0.9.3",
        "--master_port=29500",
        "train.py",
        "--lr",
        "0.1",
    ]
    recorded.unlink()
    done, _ = _cli(tmp_path, "algo-4", "torchrun", "--group", "dnn", "--", "train.py", "x")
    assert done.returncode == 0 and "plain python ['x']" in done.stdout and not recorded.exists()
    done, _ = _cli(tmp_path, "algo-1", "torchrun", "--group", "dnn", "--others", "skip", "--", "train.py")
    assert done.returncode == 0 and "plain python" not in done.stdout and not recorded.exists()
    done, _ = _cli(tmp_path, "algo-2", "torchrun", "--group", "dnn")
    assert done.returncode == 2 and "torchrun needs a script" in done.stderr


def test_python_dash_m_runs_the_same_command(tmp_path: Path) -> None:
    env = {
        **os.environ,
        runtime.BASE_DIR_ENV: str(layout(tmp_path, "algo-3")),
        runtime.HOST_ADDRESSES_ENV: json.dumps(ADDRESSES),
        "PYTHONPATH": str(Path(runtime.__file__).parents[2]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "airflow_hetero.runtime", "torchrun-args", "--group", "dnn"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.split()[:2] == ["--nnodes=2", "--node_rank=0"]
