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


def test_endpoint_started_from_python_without_the_extra_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from airflow_hetero.local.api.server import LocalEndpoint

    monkeypatch.setitem(sys.modules, "werkzeug.serving", None)  # import raises ImportError, as when absent
    with pytest.raises(RuntimeError, match=r"needs the 'local' extra .*pip install 'airflow-hetero\[local\]'$"):
        LocalEndpoint(workdir=tmp_path / "endpoint").start()
    assert not (tmp_path / "endpoint").exists()
