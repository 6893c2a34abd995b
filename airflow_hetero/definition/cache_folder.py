"""The package's cache folder, shared by the parse-time validation cache and the compiled shapes.

``$AIRFLOW_HETERO_CACHE_DIR``, else ``$XDG_CACHE_HOME/airflow-hetero`` or ``~/.cache/airflow-hetero``;
``AIRFLOW_HETERO_CACHE_DIR=off`` turns caching off. Stdlib only.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir", "cache_folder"]

_ENV = "AIRFLOW_HETERO_CACHE_DIR"


def cache_dir() -> Path | None:
    """Where validated definitions and compiled shapes are remembered; None when the cache is off."""
    folder = cache_folder()
    return None if folder is None else Path(folder)


def cache_folder() -> str | None:
    """:func:`cache_dir` as a plain string (no pathlib work on the parse path)."""
    configured = os.environ.get(_ENV)
    if configured is not None:
        return None if configured.strip().lower() in ("", "off", "0", "false", "none") else configured
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "airflow-hetero")
