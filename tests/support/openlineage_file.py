"""The events an OpenLineage file transport appended to one file (``append: true``), read while writers go on.

Several processes append to the file (each Celery worker's task processes, the scheduler): the client writes each
event as one JSON document and a newline. A last line without its newline is still being written and is left for
the next read; any other line that is not JSON is a problem the test reports.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_events(path: Path) -> list[dict[str, Any]]:
    """Every complete event in ``path`` so far, in the file's order (none when the file does not exist yet)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    complete, _, _ = text.rpartition("\n")
    events = []
    for number, line in enumerate(complete.split("\n") if complete else [], start=1):
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError as error:
            raise AssertionError(f"{path}, line {number} is not one JSON event ({error}): {line[:300]!r}") from error
    return events


def airflow_run_id(event: dict[str, Any]) -> str | None:
    """The Airflow run id of a task's or a DAG's event (its ``airflow`` or ``airflowDagRun`` run facet); None for an
    event without them (the api-server's, for a state set by hand)."""
    facets = event.get("run", {}).get("facets") or {}
    for name in ("airflow", "airflowDagRun"):
        run_id = ((facets.get(name) or {}).get("dagRun") or {}).get("run_id")
        if run_id is not None:
            return str(run_id)
    return None
