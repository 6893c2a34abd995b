"""Find the few lines of a CloudWatch page that need a closer look, scanning the page at once (pure).

Most lines of a training log are neither errors, warnings, metrics nor evidence of the host's
group: all they change is the tail. Instead of running every regex on every line, the page is
joined into one text and each regex runs over it once; only the lines a regex or a literal points
at get the per-line treatment. Results equal the per-line ones: a match in the joined text can
start in a line with no per-line match (a regex that crosses a newline), so every pointed-at line
is checked again on its own, and after each match the search restarts at the next line, so no
line's own match is skipped. Patterns whose per-line meaning could differ inside a longer text
(string anchors, negative lookarounds, DOTALL) are not page-scanned: see :func:`page_scannable`.

The per-page cost outside the rules' own searches is a handful of passes in C over the text
(join, ``str.count``, ``in`` tests): no per-line Python work, no per-line offset table; the lines
pointed at are keyed by where they end and numbered by counting newlines once, in text order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

__all__ = ["candidate_lines", "page_scannable", "page_text"]

#: What ``str.splitlines`` splits on besides "\n", plus ESC: pages holding any go line by line.
#: Tested one character at a time with ``in`` (a memchr-like scan each); the non-ASCII ones only
#: when the text is not ASCII (``str.isascii`` is a flag lookup).
_NOT_SIMPLE_ASCII = ("\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x1b")
_NOT_SIMPLE_OTHER = ("\x85", "\u2028", "\u2029")
#: Constructs that can match differently at a line's end inside a longer text than at a string's end.
_NOT_LINE_LOCAL = ("\\A", "\\Z", "\\z", "(?!", "(?<!", "(?s", "(?m")


def page_scannable(source: str, *, reviewed: Iterable[str] = ()) -> bool:
    """True when ``source`` finds the same lines in a joined page as line by line.

    ``reviewed`` are sources checked by hand (the default patterns' negative lookarounds never
    match a newline), accepted as they are.
    """
    return source in set(reviewed) or not any(token in source for token in _NOT_LINE_LOCAL)


def page_text(messages: Sequence[str]) -> str | None:
    """The page as one text (line ``k`` is ``messages[k]``), or None when a message is not one
    simple line (it holds a line break of ``str.splitlines`` or an ESC)."""
    text = "\n".join(messages)  # TypeError for a message that is not a str
    if text.count("\n") != len(messages) - 1 or any(char in text for char in _NOT_SIMPLE_ASCII):
        return None
    if not text.isascii() and any(char in text for char in _NOT_SIMPLE_OTHER):
        return None
    return text


def candidate_lines(
    text: str, patterns: Iterable[re.Pattern[str]], literals: Iterable[str] = ()
) -> list[tuple[int, int]]:
    """The lines of ``text`` (from :func:`page_text`) where a pattern may match or a literal occurs:
    ``(line index, which)`` in line order, bit ``i`` of ``which`` set for ``patterns[i]``, bit
    ``len(patterns) + j`` for ``literals[j]``. A line no bit points at for a rule does not match
    that rule on its own either."""
    hits: dict[int, int] = {}  # where the line ends (its "\n", or the text's end) -> which rules
    find, size = text.find, len(text)
    bit = 1
    for pattern in patterns:
        search, pos = pattern.search, 0
        while (match := search(text, pos)) is not None:
            end = find("\n", match.start())  # a match at a line's "\n" is in that line
            end = size if end < 0 else end
            hits[end] = hits.get(end, 0) | bit
            pos = end + 1  # the next line
            if pos > size:
                break
        bit <<= 1
    for literal in literals:
        pos = find(literal)
        while pos >= 0:
            end = find("\n", pos)
            end = size if end < 0 else end
            hits[end] = hits.get(end, 0) | bit
            pos = find(literal, end + 1) if end < size else -1
        bit <<= 1
    lines: list[tuple[int, int]] = []
    line = previous = 0
    count = text.count
    for end in sorted(hits):
        line += count("\n", previous, end)  # the newlines before this line's own
        previous = end
        lines.append((line, hits[end]))
    return lines
