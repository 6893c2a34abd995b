"""Checks of an HTML page's structure and layout: every element closed in order (html.parser), and where
headless Chromium lays out each chart and its legend (``--dump-dom`` of a copy with a measuring script)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

#: Elements that have no end tag in HTML.
VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
)


class _Nesting(HTMLParser):
    """The open elements as a stack; every end tag must close the innermost one."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, tuple[int, int]]] = []
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in VOID:
            self.stack.append((tag, self.getpos()))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """``<rect .../>``: opened and closed at once (SVG)."""

    def handle_endtag(self, tag: str) -> None:
        if not self.stack:
            self.problems.append(f"</{tag}> at {self.getpos()} closes nothing")
        elif self.stack[-1][0] != tag:
            opened, where = self.stack[-1]
            self.problems.append(f"</{tag}> at {self.getpos()} while <{opened}> opened at {where} is still open")
        else:
            self.stack.pop()


def nesting_problems(html: str) -> list[str]:
    """What is wrong with the nesting of ``html`` (empty: every opened element closed, in order)."""
    parser = _Nesting()
    parser.feed(html)
    parser.close()
    return [*parser.problems, *(f"<{tag}> opened at {where} is never closed" for tag, where in parser.stack)]


def find_chromium() -> str:
    """The system Chromium; outside CI its absence skips, in CI (.ci/run installs it) it fails."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("chromium is not installed, yet CI must run the browser tests (.ci/run installs it)")
    pytest.skip("chromium is not installed (apt-get install -y chromium); CI installs it and runs this test")


CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
)

#: Writes the page box of every chart (``svg``) and every ``.legend`` into ``<pre id=boxes>`` as JSON.
_MEASURE = """<script>
addEventListener("load", () => {
  const box = (e) => { const r = e.getBoundingClientRect();
    return {left: r.left, top: r.top + scrollY, right: r.right, bottom: r.bottom + scrollY}; };
  const out = document.createElement("pre"); out.id = "boxes";
  out.textContent = JSON.stringify({
    charts: [...document.querySelectorAll("svg")].map(box),
    legends: [...document.querySelectorAll(".legend")].map(box),
    headings: [...document.querySelectorAll("h2")].map(box),
    body: box(document.body)});
  document.documentElement.appendChild(out);
});
</script>"""


def layout(html: str, width: int, height: int, folder: Path) -> dict[str, Any]:
    """Boxes (left, top, right, bottom in page pixels) of the charts, legends and h2 headings of ``html``
    as headless Chromium lays it out in a ``width`` x ``height`` window (a copy with a measuring script,
    opened from a file)."""
    chromium = find_chromium()
    page = folder / f"page-{width}x{height}.html"
    page.write_text(html + _MEASURE, encoding="utf-8")  # after </html>: the parser still runs it
    flags = [f"--user-data-dir={folder / 'profile'}", f"--window-size={width},{height}", "--virtual-time-budget=5000"]
    dom = subprocess.run(
        [chromium, *CHROMIUM_FLAGS, *flags, "--dump-dom", page.as_uri()],
        check=True,
        capture_output=True,
        text=True,
        timeout=180,
    ).stdout
    found = re.search(r'<pre id="boxes">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    boxes: dict[str, Any] = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    return boxes


#: How long Chromium may take to load and draw a page of a local server, on a loaded 2-core machine.
SCREENSHOT_TIMEOUT = 240


def screenshot(url: str, shot: Path, size: tuple[int, int]) -> tuple[int, int, list[list[tuple[int, int, int]]]]:
    """``url`` as headless Chromium draws it in a window of ``size``, saved to ``shot``: its width, height and
    pixel rows (:func:`support.png.read_png`)."""
    from support.png import read_png

    flags = [f"--user-data-dir={shot.parent / 'profile'}", f"--window-size={size[0]},{size[1]}"]
    subprocess.run(
        [find_chromium(), *CHROMIUM_FLAGS, *flags, "--virtual-time-budget=30000", f"--screenshot={shot}", url],
        check=True,
        capture_output=True,
        timeout=SCREENSHOT_TIMEOUT,
    )
    return read_png(shot)
