"""DAG files written into Airflow's DAGs folder for ``dag.test()`` (which needs the file there), imported."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType


@contextmanager
def dag_file(name: str, text: str) -> Iterator[ModuleType]:
    """``text`` written as ``<name>.py`` into Airflow's DAGs folder (dag.test() needs the file there) and
    imported; the file is removed afterwards."""
    from airflow.configuration import conf

    folder = Path(conf.get("core", "dags_folder"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(text)
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        path.unlink()
