"""Packaging local training code the way the SDK does, plus the runtime helper."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml
from support.tarballs import members

from airflow_hetero.definition.builder.source import (
    SourceDirError,
    needs_upload,
    package_source_dir,
    program_name,
    source_upload_uri,
    submit_directory,
    upload_extra_args,
)
from airflow_hetero.definition.job import load_job

BASE = yaml.safe_load((Path(__file__).parents[1] / "rule_examples.yaml").read_text())["base"]
#: How long the extracted source may take to run in a fresh interpreter (on a loaded 2-core machine).
RUN_TIMEOUT = 120


@pytest.fixture
def code(tmp_path: Path) -> Path:
    root = tmp_path / "code"
    (root / "pkg" / "__pycache__").mkdir(parents=True)
    (root / "train.py").write_text("print('hi')\n")
    (root / "pkg" / "util.py").write_text("X = 1\n")
    (root / "pkg" / "__pycache__" / "util.cpython-311.pyc").write_bytes(b"\0")
    return root


def test_local_source_dir_is_packed_with_the_runtime_helper(code: Path) -> None:
    job = load_job(dict(BASE, source_dir="code", output_path="s3://out-bucket/some/prefix"))
    assert needs_upload(job)
    assert source_upload_uri(job, "job-1") == "s3://out-bucket/job-1/source/sourcedir.tar.gz"
    assert submit_directory(job, "job-1") == "s3://out-bucket/job-1/source/sourcedir.tar.gz"
    files = members(package_source_dir(job, base=code.parent))
    package = Path(__file__).parents[2] / "airflow_hetero" / "runtime"
    shipped = {f"airflow_hetero/runtime/{p.name}": p.read_bytes() for p in package.glob("*.py")}
    assert {"airflow_hetero/runtime/__init__.py", "airflow_hetero/runtime/__main__.py"} <= set(shipped)
    assert set(files) == {"train.py", "pkg/util.py", "airflow_hetero/__init__.py", *shipped}
    assert {name: files[name] for name in shipped} == shipped


PROBE = """
import json, os, sys
from airflow_hetero import runtime
outside = sorted(
    name for name, module in sys.modules.items()
    if name.startswith("airflow_hetero") and not (module.__file__ or "").startswith(os.getcwd())
)
heavy = sorted(m for m in sys.modules if m.split(".")[0] in {"airflow", "boto3", "botocore", "pydantic", "yaml"})
env = runtime.environment()
print(json.dumps({"outside": outside, "heavy": heavy, "group": runtime.run_by_group({"data": lambda: "data"}),
                  "master": runtime.distribution_world("data").master_addr}))
"""


def test_shipped_runtime_runs_from_the_tarball_alone(code: Path, tmp_path: Path) -> None:
    """A training host with only the unpacked ``sourcedir.tar.gz``: no package installed, a clean
    ``sys.path`` (``-S``, no ``PYTHONPATH``); the helper imports, reads its host's files, dispatches
    and runs its command line from the shipped files only."""
    job = load_job(dict(BASE, source_dir="code"))
    with tarfile.open(fileobj=io.BytesIO(package_source_dir(job, base=code.parent)), mode="r:gz") as tar:
        tar.extractall(tmp_path / "extracted", filter="data")
    config = tmp_path / "host" / "input" / "config"
    config.mkdir(parents=True)
    group = {"instance_group_name": "data", "instance_type": "ml.c5.xlarge", "hosts": ["algo-1"]}
    layout = {"current_host": "algo-1", "current_group_name": "data", "hosts": ["algo-1"], "instance_groups": [group]}
    (config / "resourceconfig.json").write_text(json.dumps(layout))
    (config / "hyperparameters.json").write_text("{}")
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME"}}
    env |= {"SAGEMAKER_BASE_DIR": str(tmp_path / "host"), "AIRFLOW_HETERO_HOST_ADDRESSES": '{"algo-1": "127.0.0.1"}'}

    def run(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-S", *args],
            check=False,
            timeout=RUN_TIMEOUT,
            cwd=tmp_path / "extracted",
            env=env,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    *printed, last = run("-c", PROBE).splitlines()
    assert printed == ["[airflow-hetero] host=algo-1 group=data instance_type=local"]
    assert json.loads(last) == {"outside": [], "heavy": [], "group": "data", "master": "127.0.0.1"}
    world = json.loads(run("-m", "airflow_hetero.runtime", "world", "--group", "data"))
    assert (world["hosts"], world["node_rank"]) == (["algo-1"], 0)


def test_users_own_airflow_hetero_folder_wins(code: Path) -> None:
    (code / "airflow_hetero").mkdir()
    (code / "airflow_hetero" / "__init__.py").write_text("MINE = True\n")
    job = load_job(dict(BASE, source_dir="code"))
    files = members(package_source_dir(job, base=code.parent))
    assert files["airflow_hetero/__init__.py"] == b"MINE = True\n"
    assert not [name for name in files if name.startswith("airflow_hetero/runtime")]


def test_entry_point_only_is_packed_at_the_root(code: Path) -> None:
    definition = {k: v for k, v in BASE.items() if k != "source_dir"} | {"entry_point": "code/train.py"}
    job = load_job(definition)
    assert program_name(job) == "train.py"
    files = members(package_source_dir(job, base=code.parent, include_runtime=False))
    assert set(files) == {"train.py"}


def test_s3_source_dir_needs_no_upload() -> None:
    job = load_job(BASE)
    assert not needs_upload(job)
    assert source_upload_uri(job, "j") is None
    assert submit_directory(job, "j") == BASE["source_dir"]


def test_missing_code_is_a_clear_error(tmp_path: Path) -> None:
    job = load_job(dict(BASE, source_dir="missing"))
    with pytest.raises(SourceDirError, match=r"source_dir: '.*missing' does not exist or is not a directory"):
        package_source_dir(job, base=tmp_path)
    (tmp_path / "missing").mkdir()
    with pytest.raises(SourceDirError, match=r"entry_point: 'train\.py' is not a file inside source_dir"):
        package_source_dir(job, base=tmp_path)


def test_upload_is_kms_encrypted_like_the_sdk() -> None:
    assert upload_extra_args(load_job(BASE)) == {"ServerSideEncryption": "aws:kms"}
    key = "arn:aws:kms:us-west-2:123456789012:key/k"
    assert upload_extra_args(load_job(dict(BASE, output_kms_key=key))) == {
        "ServerSideEncryption": "aws:kms",
        "SSEKMSKeyId": key,
    }
