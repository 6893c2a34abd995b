"""``runtime.checkpoint_dir()``: each host's own folder of the job's one checkpoint S3Uri."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_hetero import runtime
from airflow_hetero.runtime import RuntimeConfigError, RuntimeEnvironment


def layout(base: Path, host: str, groups: dict[str, list[str]]) -> Path:
    """A host's ``/opt/ml`` under ``base``: resourceconfig.json of a heterogeneous job."""
    config = base / "input" / "config"
    config.mkdir(parents=True)
    current = next(name for name, hosts in groups.items() if host in hosts)
    rc: dict[str, Any] = {
        "current_host": host,
        "current_instance_type": "ml.c5.xlarge",
        "current_group_name": current,
        "hosts": sorted(h for hosts in groups.values() for h in hosts),
        "instance_groups": [
            {"instance_group_name": name, "instance_type": "ml.c5.xlarge", "hosts": hosts}
            for name, hosts in groups.items()
        ],
        "network_interface_name": "eth0",
    }
    (config / "resourceconfig.json").write_text(json.dumps(rc))
    return base


GROUPS = {"data_group": ["algo-2", "algo-3"], "dnn_group": ["algo-1"]}


def test_each_host_gets_its_own_folder_under_the_default_local_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the endpoint /opt/ml is the host's folder (SAGEMAKER_BASE_DIR): the folder is created there."""
    folders = []
    for host in ("algo-1", "algo-2", "algo-3"):
        base = layout(tmp_path / host, host, GROUPS)
        monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(base))
        folder = runtime.checkpoint_dir()
        assert folder.is_dir()
        folders.append(folder.relative_to(base).as_posix())
    assert folders == ["checkpoints/dnn_group/algo-1", "checkpoints/data_group/algo-2", "checkpoints/data_group/algo-3"]


def test_a_local_path_under_opt_ml_is_read_in_the_hosts_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = layout(tmp_path / "host", "algo-2", GROUPS)
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(base))
    env = RuntimeEnvironment.load(base)
    assert runtime.checkpoint_dir("/opt/ml/ckpt", env=env) == base / "ckpt" / "data_group" / "algo-2"
    elsewhere = tmp_path / "elsewhere"  # not under /opt/ml: taken as given
    assert runtime.checkpoint_dir(elsewhere, env=env) == elsewhere / "data_group" / "algo-2"


def test_on_sagemaker_it_is_under_opt_ml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without SAGEMAKER_BASE_DIR (a SageMaker container) the folder is the job's LocalPath itself."""
    monkeypatch.delenv("SAGEMAKER_BASE_DIR", raising=False)
    env = RuntimeEnvironment.load(layout(tmp_path, "algo-1", GROUPS))
    folder = runtime.checkpoint_dir(env=env, create=False)
    assert folder == Path("/opt/ml/checkpoints/dnn_group/algo-1")
    assert runtime.DEFAULT_CHECKPOINT_LOCAL_PATH == "/opt/ml/checkpoints"


def test_create_false_creates_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = layout(tmp_path, "algo-3", GROUPS)
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(base))
    folder = runtime.checkpoint_dir(env=RuntimeEnvironment.load(base), create=False)
    assert not folder.exists() and not (base / "checkpoints").exists()


def test_outside_a_job_it_says_where_the_config_lives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path / "nothing"))
    with pytest.raises(RuntimeConfigError, match=r"resourceconfig\.json not found"):
        runtime.checkpoint_dir()


def test_it_works_from_a_copied_runtime_folder(tmp_path: Path) -> None:
    """runtime ships alone into containers: the checkpoint module imports only its siblings."""
    import shutil

    copied = tmp_path / "shipped" / "runtime"
    shutil.copytree(Path(runtime.__file__).parent, copied, ignore=shutil.ignore_patterns("__pycache__"))
    base = layout(tmp_path / "host", "algo-2", GROUPS)
    code = "import runtime, sys; print(runtime.checkpoint_dir()); print('airflow_hetero' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=copied.parent,
        env={"SAGEMAKER_BASE_DIR": str(base), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.splitlines()
    assert out == [str(base / "checkpoints" / "data_group" / "algo-2"), "False"]
