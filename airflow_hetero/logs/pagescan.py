"""Find the few lines of a CloudWatch page that need a closer look, scanning the page at once (pure).

Most lines of a training log are neither errors, warnings, metrics nor evidence of the host's
group: all they change is the tail. Instead of running every regex on every line, the page is
joined into one text and each regex runs over it once; only the lines a regex or a literal points
at get the per-line treatment. Results equal the per-line ones: a match in the joined text can
start in a line with no per-line match (a regex that crosses a newline), so every pointed-at line
is checked again on its own, and after each match the search restarts at the next line, so no
line's own match is skipped. Patterns whose per-line meaning could differ inside a longer text
(string anchors, negative lookarounds, DOTALL) are not page-scanned: see :func:`page_scannable`.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from itertools import accumulate

__all__ = ["candidate_lines", "page_scannable", "page_text"]

#: What ``str.splitlines`` splits on besides "\n", plus ESC: pages holding any go line by line.
_NOT_SIMPLE = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\x1b]")
#: Constructs that can match differently at a line's end inside a longer text than at a string's end.
_NOT_LINE_LOCAL = ("\\A", "\\Z", "\\z", "(?!", "(?<!", "(?s", "(?m")


def page_scannable(source: str, *, reviewed: Iterable[str] = ()) -> bool:
    """True when ``source`` finds the same lines in a joined page as line by line.

    ``reviewed`` are sources checked by hand (the default patterns' negative lookarounds never
    match a newline), accepted as they are.
    """
    return source in set(reviewed) or not any(token in source for token in _NOT_LINE_LOCAL)


def page_text(messages: Sequence[str]) -> tuple[str, list[int]] | None:
    """The page as one text and the running length of its messages, or None when a message is not
    one simple line. Line ``k`` starts at offset ``lengths[k] + k`` (one newline per line before it)."""
    text = "\n".join(messages)  # TypeError for a message that is not a str
    if _NOT_SIMPLE.search(text) or text.count("\n") != len(messages) - 1:
        return None
    return text, list(accumulate(map(len, messages), initial=0))


def candidate_lines(
    text: str, lengths: list[int], patterns: Iterable[re.Pattern[str]], literals: Iterable[str] = ()
) -> list[int]:
    """Sorted indexes of the lines where a pattern may match or a literal occurs (``lengths`` from
    :func:`page_text`)."""
    lines = range(len(lengths) - 1)
    last = len(lines) - 1

    def line_of(offset: int) -> int:
        return bisect_right(lines, offset, key=lambda k: lengths[k] + k) - 1

    found: set[int] = set()
    for pattern in patterns:
        search, pos = pattern.search, 0
        while (match := search(text, pos)) is not None:
            line = line_of(match.start())
            found.add(line)
            if line >= last:
                break
            pos = lengths[line + 1] + line + 1
    for literal in literals:
        pos = text.find(literal)
        while pos >= 0:
            line = line_of(pos)
            found.add(line)
            if line >= last:
                break
            pos = text.find(literal, lengths[line + 1] + line + 1)
    return sorted(found)
