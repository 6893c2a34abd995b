"""``airflow-hetero local serve`` where the package's ``local`` extra is not installed."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.installed import run_without_modules


@pytest.mark.parametrize("missing", ["moto", "werkzeug", "psutil"])
def test_serve_without_the_local_extra_says_what_to_install_in_one_line(tmp_path: Path, missing: str) -> None:
    proc = run_without_modules((missing,), "local", "serve", "--workdir", str(tmp_path / "endpoint"))
    assert proc.returncode == 3
    assert proc.stderr == (
        f"airflow-hetero local serve: the offline endpoint needs the 'local' extra (No module named '{missing}'): "
        "pip install 'airflow-hetero[local]'\n"
    )
    assert proc.stdout == ""  # no banner: nothing was started
    assert not (tmp_path / "endpoint").exists()
