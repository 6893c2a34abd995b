"""The package as a user gets it: its wheel, installed (not editable) in a scratch venv; and a child
Python in which some modules cannot be imported (an extra that is not installed).

``build_wheel`` builds from a copy of the files a wheel is made of, so no ``build/`` or
``*.egg-info`` is left in the checkout (a stale ``build/lib`` would leak removed files into later
wheels). ``scratch_venv`` makes a venv that sees the test venv's third-party packages (Airflow,
moto, ...) through a ``.pth`` path line, which does not run that venv's ``.pth`` hooks, so the
editable install of this checkout stays out of it, and installs the wheel into it with pip (told to
ignore the test venv's record of the package, which it sees too).
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: What the sdist/wheel build reads (pyproject's readme and license-files, the package).
BUILD_INPUTS = ("pyproject.toml", "README.md", "LICENSE", "airflow_hetero")
#: How long a short child Python (a venv made, a path printed, the CLI run once) may take on a loaded machine.
PYTHON_TIMEOUT = 120
#: How long pip may take to build or install the wheel.
PIP_TIMEOUT = 300


def build_wheel(out: Path) -> Path:
    """Build the package's wheel into ``out``; return its path."""
    source = out / "source"
    source.mkdir(parents=True)
    for name in BUILD_INPUTS:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)],
        check=True,
        capture_output=True,
        timeout=PIP_TIMEOUT,
    )
    (wheel,) = out.glob("airflow_hetero-*.whl")
    return wheel


#: A wheel of this checkout built before the run (``make test`` builds it once for every suite).
WHEEL_ENV = "AIRFLOW_HETERO_TEST_WHEEL"


@functools.cache
def built_wheel() -> Path:
    """The wheel of this checkout: the one ``WHEEL_ENV`` names, else built once per test process
    (removed at exit)."""
    if given := os.environ.get(WHEEL_ENV):
        return Path(given)
    out = Path(tempfile.mkdtemp(prefix="airflow-hetero-wheel-"))
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    return build_wheel(out)


def scratch_venv(where: Path, wheel: Path) -> Path:
    """A venv at ``where`` with ``wheel`` installed (no dependencies: the test venv's serve); its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=PYTHON_TIMEOUT)
    python = where / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
        timeout=PYTHON_TIMEOUT,
    ).stdout.strip()
    Path(site, "test-venv-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed", "-q", str(wheel)],
        check=True,
        capture_output=True,
        timeout=PIP_TIMEOUT,
    )
    return python


def run_without_modules(names: tuple[str, ...], *argv: str) -> subprocess.CompletedProcess[str]:
    """Run ``airflow-hetero ARGV`` in a child Python where ``names`` (and their submodules) cannot
    be imported: a meta-path finder first in line raises ``ModuleNotFoundError`` for them, as Python
    does for a package that is not installed."""
    code = textwrap.dedent(
        f"""
        import sys

        class Missing:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {names!r} or name in {names!r}:
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
                return None

        sys.meta_path.insert(0, Missing())
        from airflow_hetero.cli import main
        sys.exit(main(sys.argv[1:]))
        """
    )
    return subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=PYTHON_TIMEOUT, check=False
    )


if __name__ == "__main__":  # `make wheel`: python tests/support/installed.py OUT_DIR
    print(build_wheel(Path(sys.argv[1])))
