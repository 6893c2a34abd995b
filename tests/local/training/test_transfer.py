"""Pure parts of the local endpoint's S3 side: archives, S3 key placement, merged model directories."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from airflow_hetero.local.training.transfer import TransferError, relative_key, safe_extract, tar_directories


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
