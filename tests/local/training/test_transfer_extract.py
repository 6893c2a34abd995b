"""Source extraction without tarfile's filters: links count only by where they fully resolve.

Each refused archive is checked for what it left: nothing inside the target, nothing outside it.
The archives follow the shapes of CVE-2025-4517 (a symlink chain whose resolved path exceeds
PATH_MAX, which made ``os.path.realpath`` in tarfile's data filter stop early) and its relatives.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from airflow_hetero.local.training.transfer import MAX_LINK_HOPS, TransferError, safe_extract


def _archive(*members: tuple[str, bytes, str | bytes]) -> bytes:
    """(name, tar type, data for files / link target for links) -> gzipped tarball."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, kind, payload in members:
            info = tarfile.TarInfo(name)
            info.type = kind
            if kind == tarfile.REGTYPE:
                data = payload if isinstance(payload, bytes) else payload.encode()
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                info.linkname = str(payload)
                tar.addfile(info)
    return buffer.getvalue()


def _refused(tmp_path: Path, data: bytes, message: str) -> None:
    dest = tmp_path / "sandbox" / "code"
    with pytest.raises(TransferError, match=message):
        safe_extract(data, dest)
    assert list(dest.iterdir()) == []  # nothing kept inside
    outside = [p for p in tmp_path.rglob("*") if p not in (dest, dest.parent)]
    assert outside == []  # nothing written outside


def test_a_chain_longer_than_path_max_is_refused(tmp_path: Path) -> None:
    # each step adds a long directory name and steps back out with links: the resolved path grows
    # past PATH_MAX (4096) while every single link looks harmless, then the last one climbs out
    long = "d" * 247
    steps = 20
    members: list[tuple[str, bytes, str | bytes]] = []
    path = ""
    for i in range(steps):
        members.append((f"{path}{long}", tarfile.DIRTYPE, ""))
        members.append((f"{path}l{i}", tarfile.SYMTYPE, long))
        path += f"l{i}/"
    members.append(("escape", tarfile.SYMTYPE, path + "/".join([".."] * (steps + 2)) + "/outside"))
    members.append(("escape/pwned", tarfile.REGTYPE, "x"))
    assert len(path) + steps * len(long) > 4096
    _refused(tmp_path, _archive(("train.py", tarfile.REGTYPE, "print(1)"), *members), "outside|below a file or link")


def test_links_pointing_through_other_links_out_of_the_target_are_refused(tmp_path: Path) -> None:
    data = _archive(
        ("a", tarfile.DIRTYPE, ""),
        ("a/up", tarfile.SYMTYPE, ".."),  # inside on its own: a/.. is the target
        ("out", tarfile.SYMTYPE, "a/up/.."),  # through a/up: one level above the target
        ("train.py", tarfile.REGTYPE, "print(1)"),
    )
    _refused(tmp_path, data, "points outside")


def test_link_loops_and_too_many_hops_are_refused(tmp_path: Path) -> None:
    _refused(tmp_path, _archive(("x", tarfile.SYMTYPE, "y"), ("y", tarfile.SYMTYPE, "x")), "more than 40 links")
    hops = MAX_LINK_HOPS + 1  # resolving l0 follows l1 ... l41: one more than the kernel would
    chain = [(f"l{i}", tarfile.SYMTYPE, f"l{i + 1}") for i in range(hops + 1)]
    _refused(tmp_path, _archive(*chain, (f"l{hops + 1}", tarfile.REGTYPE, "x")), "more than 40 links")
    fine = [(f"l{i}", tarfile.SYMTYPE, f"l{i + 1}") for i in range(MAX_LINK_HOPS)]
    safe_extract(_archive(*fine, (f"l{MAX_LINK_HOPS}", tarfile.REGTYPE, "x")), tmp_path / "fine")
    assert (tmp_path / "fine" / "l0").read_text() == "x"


def test_writing_through_a_link_is_refused_even_when_it_points_inside(tmp_path: Path) -> None:
    data = _archive(
        ("real", tarfile.DIRTYPE, ""),
        ("alias", tarfile.SYMTYPE, "real"),
        ("alias/file.py", tarfile.REGTYPE, "x"),
    )
    _refused(tmp_path, data, "below a file or link")


def test_hard_links_must_name_a_file_of_the_archive(tmp_path: Path) -> None:
    _refused(tmp_path, _archive(("h", tarfile.LNKTYPE, "../../etc/passwd")), "points outside")
    _refused(tmp_path, _archive(("h", tarfile.LNKTYPE, "missing.py")), "does not name a file")


def test_duplicates_and_oversized_archives_are_refused(tmp_path: Path) -> None:
    twice = _archive(("a.py", tarfile.REGTYPE, "1"), ("a.py", tarfile.SYMTYPE, "/etc/passwd"))
    _refused(tmp_path, twice, "more than once")
    big = _archive(("a.bin", tarfile.REGTYPE, bytes(600)), ("b", tarfile.LNKTYPE, "a.bin"))
    dest = tmp_path / "sandbox" / "code"
    with pytest.raises(TransferError, match="1200 bytes, more than the local endpoint's limit of 1000"):
        safe_extract(big, dest, max_bytes=1000)  # a hard link is a copy: it counts again
    assert list(dest.iterdir()) == []
    assert safe_extract(big, dest, max_bytes=1200) == ["a.bin", "b"]


def test_safe_links_files_and_hard_links_are_written(tmp_path: Path) -> None:
    data = _archive(
        ("pkg/mod.py", tarfile.REGTYPE, "print('mod')"),
        ("pkg/sub", tarfile.DIRTYPE, ""),
        ("pkg/sub/up", tarfile.SYMTYPE, "../mod.py"),
        ("chain", tarfile.SYMTYPE, "pkg/sub/up"),
        ("dangling", tarfile.SYMTYPE, "pkg/not-yet"),  # dangling but inside: allowed
        ("copy.py", tarfile.LNKTYPE, "pkg/mod.py"),
    )
    dest = tmp_path / "code"
    safe_extract(data, dest)
    assert (dest / "chain").read_text() == "print('mod')"
    assert (dest / "copy.py").read_text() == "print('mod')" and not (dest / "copy.py").is_symlink()
    assert os.readlink(dest / "dangling") == "pkg/not-yet"
