"""Validate a definition once per content: DAG re-parses of an unchanged definition skip pydantic.

Airflow parses every DAG file again and again, each time in a fresh forked process, so checking a
definition at parse time would import pydantic and run every rule in every parse. A definition that
passed is remembered as an empty file named by a digest of its canonical JSON and of everything
validation depends on (this package's definition code and data, botocore's sagemaker model,
pydantic): a later parse of the same definition with the same code stats a few files and imports
no pydantic. Only successes are remembered, so a bad definition fails at every parse; the task
validates again before it submits anything.

The cache folder is ``$AIRFLOW_HETERO_CACHE_DIR``, else ``$XDG_CACHE_HOME/airflow-hetero`` or
``~/.cache/airflow-hetero``; ``AIRFLOW_HETERO_CACHE_DIR=off`` turns the cache off. A folder that
cannot be written only means validating every time. Stdlib only until a definition is new.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["cache_dir", "definition_key", "validate_once"]

_ENV = "AIRFLOW_HETERO_CACHE_DIR"
_HERE = os.path.dirname(os.path.abspath(__file__))


def cache_dir() -> Path | None:
    """Where validated definitions are remembered; None when the cache is off."""
    configured = os.environ.get(_ENV)
    if configured is not None:
        return None if configured.strip().lower() in ("", "off", "0", "false", "none") else Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "airflow-hetero"


def _stat_line(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return f"{path}:missing"
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def _files(folder: str, suffix: str) -> list[str]:
    try:
        return sorted(e.path for e in os.scandir(folder) if e.name.endswith(suffix))
    except OSError:
        return []


@functools.cache
def _code_fingerprint() -> str:
    """What validation depends on besides the definition: code, data and the libraries' files."""
    from airflow_hetero import __version__
    from airflow_hetero.definition.service_model import InstanceTypeCatalogError, sagemaker_model_path

    parts = [__version__]
    parts += [_stat_line(p) for p in _files(_HERE, ".py") + _files(os.path.join(_HERE, "data"), ".json")]
    try:
        parts.append(_stat_line(str(sagemaker_model_path())))  # the instance types come from it
    except InstanceTypeCatalogError as err:
        parts.append(f"botocore:{err}")
    for library in ("pydantic", "pydantic_core"):
        spec = importlib.util.find_spec(library)
        parts.append(_stat_line(spec.origin) if spec and spec.origin else f"{library}:missing")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _canonical(value: Any) -> Any:
    """``value`` with only JSON types (str keys, lists, no tuples); raises TypeError otherwise.

    Tuples, non-string keys and other types could validate differently from their JSON look-alikes,
    so such definitions are never cached.
    """
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError("non-string key")
        return {k: _canonical(v) for k, v in value.items()}
    raise TypeError(type(value).__name__)


def definition_key(data: Mapping[str, Any]) -> str | None:
    """The cache key of a definition mapping, or None when it cannot be cached."""
    try:
        text = json.dumps(_canonical(dict(data)), sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return None
    return hashlib.sha256(f"{_code_fingerprint()}\n{text}".encode()).hexdigest()


def validate_once(data: Mapping[str, Any]) -> None:
    """Raise :class:`~airflow_hetero.definition.errors.JobDefinitionError` for a bad definition.

    A definition already validated with the same code returns at once, without importing pydantic.
    """
    folder = cache_dir()
    key = definition_key(data) if folder is not None else None
    marker = folder / key[:2] / key if folder is not None and key is not None else None
    if marker is not None and marker.exists():
        return
    from airflow_hetero.definition.job import load_job

    load_job(data)  # raises for a bad definition: nothing is remembered
    if marker is not None:
        try:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
        except OSError:
            pass  # a read-only home: validate every time
