"""The host shim's own /opt/ml: a mount namespace as root, a user namespace without root, and the
reason it gives when neither can be had (made for real: a user namespace whose limit is 0, entered
by an unprivileged user)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_hetero.local.host import shim

NOBODY = 65534
#: A Python any user may run (the test's own may live under a folder only root may enter).
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin")
needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or SYSTEM_PYTHON is None, reason="switching to another user needs root and /usr/bin/python3"
)


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """A folder under /tmp that other users may enter (pytest's own is root's only)."""
    folder = Path(tempfile.mkdtemp(prefix="shim-ns-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _host_dir(tmp_path: Path) -> tuple[Path, Path]:
    """A host folder holding one config file, and a copy of the shim any user may read."""
    host = tmp_path / "algo-1"
    (host / "input" / "config").mkdir(parents=True)
    (host / "input" / "config" / "resourceconfig.json").write_text('{"current_host": "algo-1"}')
    copy = tmp_path / "shim.py"
    shutil.copyfile(shim.__file__, copy)
    copy.chmod(0o644)
    return host, copy


def _run_as_nobody(code: str) -> subprocess.CompletedProcess[str]:
    prelude = f"import os; os.setgroups([]); os.setgid({NOBODY}); os.setuid({NOBODY})\n"
    assert SYSTEM_PYTHON is not None
    return subprocess.run(
        [SYSTEM_PYTHON, "-c", prelude + code], capture_output=True, text=True, timeout=30, check=False
    )


def test_the_command_sees_its_host_folder_as_opt_ml(tmp_path: Path) -> None:
    host, copy = _host_dir(tmp_path)
    command = [sys.executable, str(copy), "--opt-ml", str(host), "--", "/bin/sh", "-c", "pwd; cat input/config/*"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["/opt/ml", '{"current_host": "algo-1"}']
    assert not Path("/opt/ml/input/config/resourceconfig.json").exists()  # nothing leaked out of the namespace


@needs_root
def test_an_unprivileged_user_gets_it_through_a_user_namespace(tmp_path: Path) -> None:
    host, copy = _host_dir(tmp_path)
    done = _run_as_nobody(
        f"os.execv({SYSTEM_PYTHON!r}, [{SYSTEM_PYTHON!r}, {str(copy)!r}, '--opt-ml', {str(host)!r}, '--', "
        "'/bin/sh', '-c', 'id -u; cat /opt/ml/input/config/resourceconfig.json'])"
    )
    if "an unprivileged user namespace" in done.stderr:
        pytest.skip(f"this kernel allows no unprivileged user namespaces: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [str(NOBODY), '{"current_host": "algo-1"}']


@needs_root
def test_when_neither_is_available_the_shim_says_why_and_runs_nothing(tmp_path: Path) -> None:
    host, copy = _host_dir(tmp_path)
    marker = tmp_path / "ran"
    # a user namespace (uids 0..65535 mapped by this root) whose own limit of user namespaces is 0,
    # in which an unprivileged user starts the shim: no mount namespace, no user namespace
    code = textwrap.dedent(
        f"""
        import ctypes, os, sys
        libc = ctypes.CDLL(None, use_errno=True)
        made, mapped = os.pipe(), os.pipe()
        pid = os.fork()
        if pid == 0:
            if libc.unshare(0x10000000) != 0:
                os._exit(99)
            os.write(made[1], b"x")
            os.read(mapped[0], 1)
            with open("/proc/sys/user/max_user_namespaces", "w") as f:
                f.write("0")
            os.setgroups([]); os.setgid({NOBODY}); os.setuid({NOBODY})
            os.execv({SYSTEM_PYTHON!r}, [{SYSTEM_PYTHON!r}, {str(copy)!r}, "--opt-ml", {str(host)!r}, "--",
                                      "/bin/sh", "-c", "touch {marker}"])
        os.read(made[0], 1)
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{{pid}}/{{name}}", "w") as f:
                f.write("0 0 65536")
        os.write(mapped[1], b"x")
        sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=False)
    if done.returncode == 99:
        pytest.skip("this kernel lets no process here make a user namespace")
    assert done.returncode == shim.ISOLATION_FAILED, done.stderr
    assert done.stderr.strip() == (
        "hostshim: cannot give this host its own /opt/ml: neither is available here "
        "(an unprivileged user namespace: No space left on device)"
    )
    assert not marker.exists()


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--opt-ml", "/x", "--", "a"], (None, shim.GRACE, "/x", None, ["a"])),
        (["--parent", "3", "--opt-ml", "/y", "--grace", "1", "--", "a"], (3, 1.0, "/y", None, ["a"])),
    ],
)
def test_the_shim_reads_the_opt_ml_option(argv: list[str], expected: tuple[object, ...]) -> None:
    assert shim.parse(argv) == expected
