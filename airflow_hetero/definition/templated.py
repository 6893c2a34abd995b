"""Whether a definition or request holds Jinja: then its validation waits until it is rendered."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["has_template"]


def has_template(value: Any) -> bool:
    """True when any string inside ``value`` holds Jinja (then validation waits for rendering)."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if value is None or isinstance(value, int | float):  # before the Mapping ABC check, which is slow
        return False
    if isinstance(value, list | tuple):
        return any(has_template(v) for v in value)
    if isinstance(value, Mapping):
        return any(has_template(k) or has_template(v) for k, v in value.items())
    return False
