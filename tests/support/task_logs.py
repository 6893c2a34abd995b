"""Capture what an operator writes to ``self.log`` (Airflow 3 task loggers are structlog, not caplog)."""

from __future__ import annotations

from typing import Any


class RecordingLogger:
    """Stands in for a task's logger: keeps every message, %-formatted, with its level."""

    def __init__(self) -> None:
        self.records: list[tuple[str, str]] = []

    def _log(self, level: str, msg: Any, *args: Any, **_: Any) -> None:
        text = str(msg) % args if args else str(msg)
        self.records.append((level, text))

    def debug(self, msg: Any, *args: Any, **kw: Any) -> None:
        self._log("debug", msg, *args, **kw)

    def info(self, msg: Any, *args: Any, **kw: Any) -> None:
        self._log("info", msg, *args, **kw)

    def warning(self, msg: Any, *args: Any, **kw: Any) -> None:
        self._log("warning", msg, *args, **kw)

    def error(self, msg: Any, *args: Any, **kw: Any) -> None:
        self._log("error", msg, *args, **kw)

    def exception(self, msg: Any, *args: Any, **kw: Any) -> None:
        self._log("error", msg, *args, **kw)

    @property
    def lines(self) -> list[str]:
        return [text for _, text in self.records]

    def text(self) -> str:
        return "\n".join(self.lines)


def record_logs(task: Any) -> RecordingLogger:
    """Route ``task.log`` to a new :class:`RecordingLogger` and return it."""
    recorder = RecordingLogger()
    task._cached_logger = recorder  # Airflow 3 (task SDK)
    task._log = recorder  # Airflow 2.11 (LoggingMixin)
    return recorder
