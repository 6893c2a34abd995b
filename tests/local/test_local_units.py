"""Pure parts of the local endpoint: archives, S3 key placement, host plans, request rules."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from airflow_hetero.job.resource_config import GroupSpec
from airflow_hetero.local.api.errors import ServiceError
from airflow_hetero.local.api.request_rules import validate_create
from airflow_hetero.local.job.layout import plan_cluster
from airflow_hetero.local.job.transfer import TransferError, relative_key, safe_extract, tar_directories


def _tar(*members: tarfile.TarInfo, data: bytes = b"x") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for member in members:
            if member.isfile():
                member.size = len(data)
                tar.addfile(member, io.BytesIO(data))
            else:
                tar.addfile(member)
    return buffer.getvalue()


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    return info


@pytest.mark.parametrize(
    ("member", "message"),
    [
        (_member("../evil.py"), "outside the code directory"),
        (_member("a/../../evil.py"), "outside the code directory"),
        (_member("/etc/evil.py"), "absolute path"),
        (_member("link", tarfile.SYMTYPE, "../../outside"), "points outside"),
        (_member("a/link", tarfile.SYMTYPE, "/etc/passwd"), "points outside"),
        (_member("hard", tarfile.LNKTYPE, "../x"), "points outside"),
        (_member("dev", tarfile.CHRTYPE), "not a regular file"),
    ],
)
def test_safe_extract_refuses_members_that_escape(tmp_path: Path, member: tarfile.TarInfo, message: str) -> None:
    data = _tar(_member("train.py"), member)
    with pytest.raises(TransferError, match=message):
        safe_extract(data, tmp_path / "code")
    assert not (tmp_path / "code" / "train.py").exists()  # nothing is written when any member is bad
    assert not (tmp_path / "evil.py").exists()


def test_safe_extract_accepts_links_inside(tmp_path: Path) -> None:
    data = _tar(
        _member("pkg/mod.py"),
        _member("pkg/alias.py", tarfile.SYMTYPE, "mod.py"),
        _member("top.py", tarfile.SYMTYPE, "pkg/mod.py"),
    )
    assert sorted(safe_extract(data, tmp_path)) == ["pkg/alias.py", "pkg/mod.py", "top.py"]
    assert (tmp_path / "top.py").read_bytes() == b"x"


def test_safe_extract_refuses_garbage(tmp_path: Path) -> None:
    with pytest.raises(TransferError, match="not a valid tar archive"):
        safe_extract(b"definitely not a tarball", tmp_path)


@pytest.mark.parametrize(
    ("prefix", "key", "expected"),
    [
        ("data/train", "data/train/a.csv", "a.csv"),
        ("data/train/", "data/train/sub/a.csv", "sub/a.csv"),
        ("data/train.csv", "data/train.csv", "train.csv"),
        ("data/tr", "data/train/a.csv", "train/a.csv"),
        ("", "a.csv", "a.csv"),
    ],
)
def test_relative_key(prefix: str, key: str, expected: str) -> None:
    assert relative_key(prefix, key) == expected


def test_tar_directories_merges_hosts(tmp_path: Path) -> None:
    (tmp_path / "h1").mkdir()
    (tmp_path / "h2" / "sub").mkdir(parents=True)
    (tmp_path / "h1" / "a.txt").write_text("1")
    (tmp_path / "h2" / "sub" / "b.txt").write_text("2")
    with tarfile.open(fileobj=io.BytesIO(tar_directories([tmp_path / "h1", tmp_path / "h2"]))) as tar:
        assert sorted(tar.getnames()) == ["a.txt", "sub/b.txt"]


def test_plan_is_seeded_shuffled_and_complete(tmp_path: Path) -> None:
    groups = [GroupSpec("data", "ml.c5.xlarge", 3), GroupSpec("dnn", "ml.p3.2xlarge", 2)]
    plans = [plan_cluster(groups, seed=f"0/job-{i}", slot=7, hosts_root=tmp_path) for i in range(20)]
    for plan in plans:
        assert [h.name for h in plan.hosts] == [f"algo-{n}" for n in range(1, 6)]
        assert sorted(plan.members["data"] + plan.members["dnn"]) == sorted(h.name for h in plan.hosts)
        assert len(plan.members["data"]) == 3
        assert {h.address for h in plan.hosts} == {f"127.0.7.{n}" for n in range(1, 6)}
        assert all(h.base_dir == tmp_path / h.name for h in plan.hosts)
    again = plan_cluster(groups, seed="0/job-3", slot=7, hosts_root=tmp_path)
    assert again.members == plans[3].members
    # not simply "first group gets the first numbers"
    assert any(p.members["data"] != ["algo-1", "algo-2", "algo-3"] for p in plans)
    resource = plans[0].resource_config(plans[0].hosts[0])
    assert resource["instance_groups"][0]["hosts"] == plans[0].members["data"]


def _request(**changes: object) -> dict[str, object]:
    request: dict[str, object] = {
        "TrainingJobName": "rules-job",
        "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
        "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"},
        "OutputDataConfig": {"S3OutputPath": "s3://bkt/out"},
        "ResourceConfig": {
            "VolumeSizeInGB": 30,
            "InstanceGroups": [
                {"InstanceGroupName": "data", "InstanceType": "ml.c5.xlarge", "InstanceCount": 1},
                {"InstanceGroupName": "dnn", "InstanceType": "ml.p3.2xlarge", "InstanceCount": 1},
            ],
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": 60},
    }
    request.update(changes)
    return request


def _refusal(request: dict[str, object]) -> ServiceError:
    with pytest.raises(ServiceError) as info:
        validate_create(request)
    assert info.value.code == "ValidationException"
    return info.value


def test_constraint_messages_use_the_service_wording() -> None:
    err = _refusal(_request(TrainingJobName="bad_name", HyperParameters={"k": "v" * 2501}))
    assert err.message.startswith("2 validation errors detected: ")
    assert (
        "Value 'bad_name' at 'trainingJobName' failed to satisfy constraint: Member must satisfy regular "
        "expression pattern" in err.message
    )
    assert (
        "at 'hyperParameters.k' failed to satisfy constraint: Member must have length less than or equal "
        "to 2500" in err.message
    )


def test_role_arn_and_instance_type_enum() -> None:
    groups = [{"InstanceGroupName": "g", "InstanceType": "ml.bogus", "InstanceCount": 1}]
    err = _refusal(_request(RoleArn="not-an-arn", ResourceConfig={"VolumeSizeInGB": 1, "InstanceGroups": groups}))
    assert "at 'roleArn'" in err.message
    assert (
        "Value 'ml.bogus' at 'resourceConfig.instanceGroups.1.member.instanceType' failed to satisfy "
        "constraint: Member must satisfy enum value set: [" in err.message
    )


def test_sdk_requests_are_accepted_unless_the_service_refuses_them() -> None:
    cases = sorted(Path(__file__).parents[1].glob("sdk_cases/*.request.json"))
    if not cases:
        pytest.skip("no SDK request cases")
    for path in cases:
        request = json.loads(path.read_text())
        request.setdefault("TrainingJobName", "sdk-case")
        try:
            validate_create(request)
        except ServiceError as err:  # only the service's own rule or a documented local limitation
            assert err.message.startswith(
                ("Some channels have assigned instance groups", "The local endpoint does not support Pipe")
            ), (path.name, err.message)
