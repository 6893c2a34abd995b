"""Make text from a job's logs safe to show: no ANSI escapes, no control characters (pure, tiny).

Shared by the line accumulator, the summary, the task-log table and the live tail; light enough to
be imported at DAG-parse time.
"""

from __future__ import annotations

import re

__all__ = ["strip_control"]

#: ANSI escape sequences (CSI ``ESC [ ... final``, OSC ``ESC ] ... BEL/ST``, two-byte ``ESC x``), then
#: any other C0/C1 control character or DEL; tabs are kept.
_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?|\x9b[0-?]*[ -/]*[@-~]"
    r"|[\x00-\x08\x0a-\x1f\x7f-\x9f]"
)


def strip_control(text: str) -> str:
    """``text`` without ANSI escape sequences and control characters (tabs kept): safe for a terminal."""
    if text.isprintable():
        return text
    return _CONTROL.sub("", text)
