"""The one-line ``[airflow-hetero]`` marker that maps a host's log stream to its group.

Pure: the log summary (``airflow_hetero.logs.streams``) parses what the hosts print.
"""

from __future__ import annotations

import re
import urllib.parse

MARKER_PREFIX = "[airflow-hetero]"

_MARKER_RE = re.compile(
    r"(?:^|(?<=[\s:>\]]))\[airflow-hetero\] host=([^\s=]+) group=([^\s=]+) instance_type=([^\s=]+)\s*$"
)


def format_marker(host: str, group: str, instance_type: str) -> str:
    """``[airflow-hetero] host=<host> group=<group> instance_type=<type>`` (values %-escaped)."""
    parts = []
    for key, value in (("host", host), ("group", group), ("instance_type", instance_type)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"marker {key} must be a non-empty string, got {value!r}")
        parts.append(f"{key}={urllib.parse.quote(value, safe='')}")
    return f"{MARKER_PREFIX} {' '.join(parts)}"


def parse_marker(line: str) -> tuple[str, str] | None:
    """``(host, group)`` from a marker line, else None.

    The marker may follow a prefix ending in whitespace, ``:``, ``>`` or ``]`` (e.g. mpirun's
    ``[1,0]<stdout>:``) but must end the line.
    """
    match = _MARKER_RE.search(line)
    if match is None:
        return None
    return urllib.parse.unquote(match.group(1)), urllib.parse.unquote(match.group(2))
