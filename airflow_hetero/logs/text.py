"""Text in a job's summary: no ANSI escapes, no control characters; times as ISO 8601 (pure, tiny).

Shared by the line accumulator, the summary, its series, the task-log table and the live tail;
light enough to be imported at DAG-parse time.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

__all__ = ["iso", "strip_control"]

#: ANSI escape sequences (CSI ``ESC [ ... final``, OSC ``ESC ] ... BEL/ST``, two-byte ``ESC x``), then
#: any other C0/C1 control character or DEL; tabs are kept.
_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?|\x9b[0-?]*[ -/]*[@-~]"
    r"|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]"
)
#: line breaks, which become one space (a FailureReason "...lines:\nTraceback" keeps its words apart)
_BREAKS = re.compile(r"[\r\n]+")


def strip_control(text: str) -> str:
    """``text`` without ANSI escape sequences and control characters (tabs kept, line breaks made one
    space): safe for a terminal, on one line."""
    if text.isprintable():
        return text
    return _BREAKS.sub(" ", _CONTROL.sub("", text))


def iso(value: Any) -> str | None:
    """datetime or epoch milliseconds -> ISO 8601 UTC string (None stays None)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
    else:
        moment = datetime.fromtimestamp(float(value) / 1000.0, tz=UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
