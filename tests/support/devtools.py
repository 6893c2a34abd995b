"""Headless Chromium driven over the DevTools protocol on a pipe (stdlib only: no websocket client).

``--remote-debugging-pipe`` makes Chromium read commands from fd 3 and write answers to fd 4, each
message JSON ended by a NUL byte. :class:`Browser` opens one page with extra request headers (a
bearer token), a window size, then reads the layout with ``Runtime.evaluate`` and takes a
screenshot with ``Page.captureScreenshot``: what a person would see, measured.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from support.page_layout import CHROMIUM_FLAGS, find_chromium

FLAGS = (*CHROMIUM_FLAGS, "--remote-debugging-pipe")


class Browser:
    """One headless Chromium; a context manager that kills it on exit."""

    def __init__(self, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self._profile = tempfile.mkdtemp(prefix="hetero-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def fds() -> None:  # Chromium's ends at 3 (commands in) and 4 (answers out), whatever their numbers
            commands, answers = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_chrome_r, from_chrome_w))
            os.dup2(commands, 3)
            os.dup2(answers, 4)

        self.proc = subprocess.Popen(
            [find_chromium(), *FLAGS, f"--user-data-dir={self._profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=fds,  # noqa: PLW1509 (only os.dup2 runs there: no lock to deadlock on)
            close_fds=False,
            start_new_session=True,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._next = 0
        self._buffer = b""
        self.events: list[dict[str, Any]] = []

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End Chromium and its children (its own process group)."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, 9)
            self.proc.wait(timeout=30)
        for fd in (self._to_chrome, self._from_chrome):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self._profile, ignore_errors=True)

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("no answer from Chromium")
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                raise AssertionError(f"Chromium closed its pipe (exit {self.proc.poll()})")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        result: dict[str, Any] = json.loads(message)
        return result

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        """Send one command; its result (events that arrive meanwhile are kept in :attr:`events`)."""
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            answer = self._read(deadline)
            if answer.get("id") == self._next:
                if "error" in answer:
                    raise AssertionError(f"{method}: {answer['error']}")
                result: dict[str, Any] = answer.get("result", {})
                return result
            self.events.append(answer)

    def wait_event(self, method: str, session: str) -> dict[str, Any]:
        """The first event ``method`` of ``session`` (already received or still to come)."""
        deadline = time.monotonic() + self.timeout
        while True:
            for event in self.events:
                if event.get("method") == method and event.get("sessionId") == session:
                    self.events.remove(event)
                    return event
            self.events.append(self._read(deadline))

    def open(self, url: str, headers: dict[str, str], width: int, height: int) -> str:
        """Load ``url`` in a new page of ``width`` x ``height`` CSS pixels; the page's session id."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = str(self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"])
        self.send("Network.enable", session=session)
        self.send("Network.setExtraHTTPHeaders", {"headers": headers}, session)
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        self.send("Emulation.setDeviceMetricsOverride", metrics, session)
        self.send("Page.enable", session=session)
        self.send("Page.navigate", {"url": url}, session)
        self.wait_event("Page.loadEventFired", session)
        return session

    def evaluate(self, session: str, expression: str) -> Any:
        """The value of a JavaScript expression in the page (DevTools' own evaluation, not the page's scripts)."""
        answer = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session)
        if "exceptionDetails" in answer:
            raise AssertionError(f"{expression}: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def screenshot(self, session: str, path: Path) -> Path:
        """The whole page as a PNG at ``path``."""
        shot = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path
