"""Whether an HTML page is well-formed: every element it opens is closed, in order (stdlib html.parser).

Browsers repair a page silently (an unclosed ``<div>`` swallows what follows it), so a page that
renders can still be broken; :func:`html_problems` names each misnested or unclosed tag with its
line and column.
"""

from __future__ import annotations

from html.parser import HTMLParser

#: Elements that have no end tag.
VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"})


class _Nesting(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[tuple[str, tuple[int, int]]] = []
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in VOID:
            self.open.append((tag, self.getpos()))

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        line, col = self.getpos()
        if not self.open:
            self.problems.append(f"</{tag}> at {line}:{col} closes nothing")
            return
        if not any(name == tag for name, _ in self.open):
            self.problems.append(f"</{tag}> at {line}:{col} closes nothing open")
            return
        while True:  # close up to the match, as a browser would, naming each element left open
            name, (open_line, open_col) = self.open.pop()
            if name == tag:
                return
            self.problems.append(f"<{name}> from {open_line}:{open_col} is not closed before </{tag}> at {line}:{col}")


def html_problems(html: str) -> list[str]:
    """Misnested end tags and elements left open; empty when the page is well-formed."""
    parser = _Nesting()
    parser.feed(html)
    parser.close()
    return parser.problems + [f"<{tag}> from {line}:{col} is never closed" for tag, (line, col) in parser.open]
