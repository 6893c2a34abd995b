"""Single-field checks of a training-job definition and the service's limits (pure).

Called from the field validators of :mod:`airflow_hetero.definition.model`; each raises an error
whose message is shown to the user as written. Cross-field rules live in
:mod:`airflow_hetero.definition.rules.cross_field`.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError
from pydantic_core import PydanticCustomError

from airflow_hetero.definition.errors import Problem
from airflow_hetero.definition.facts import instance_types
from airflow_hetero.definition.facts.roles import role_problem

MAX_CHANNELS = 20
MAX_HYPERPARAMETERS = 100
MAX_HP_KEY = 256
MAX_HP_VALUE = 2500
MAX_ENV = 100
S3_URI = re.compile(r"^(https|s3)://([^/]+)/?(.*)$")
CHANNEL_NAME = re.compile(r"^[A-Za-z0-9\.\-_]+$")
ENV_KEY = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
HETERO_MINIMUM = {"pytorch": (1, 10), "tensorflow": (2, 6)}


def fail(msg: str) -> PydanticCustomError:
    """An error whose message is shown as is (no 'Value error,' prefix, braces kept)."""
    return PydanticCustomError("hetero_rule", msg)  # no context given: braces are shown as written


def line_error(problem: Problem) -> dict[str, Any]:
    """A rule's problem as a pydantic line error for ``ValidationError.from_exception_data``."""
    return {"type": fail(problem.msg), "loc": problem.path, "input": None}


def reraisable(err: ValidationError) -> list[dict[str, Any]]:
    """The errors of ``err`` as line errors that can be raised again together with others."""
    out: list[dict[str, Any]] = []
    for item in err.errors(include_url=False):
        msg = str(item["msg"])
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        kind = str(item["type"])
        out.append({"type": PydanticCustomError(kind, msg), "loc": item["loc"], "input": item.get("input")})
    return out


# --- single-field checks ---------------------------------------------------------------------


def check_group_name(value: str) -> str:
    if not 1 <= len(value) <= 64:
        raise fail(f"must be 1 to 64 characters long (got {len(value)})")
    return value


def check_instance_type(value: str) -> str:
    problem = instance_types.type_problem(value)
    if problem:
        raise fail(problem)
    return value


def check_not_bool(value: Any) -> Any:
    """Numbers must not be given as true/false (pydantic would read them as 1/0)."""
    if isinstance(value, bool):
        raise fail("must be a whole number, not true/false")
    return value


def check_count(value: int) -> int:
    if value < 1:
        raise fail(f"must be at least 1 (got {value})")
    return value


def check_s3_uri(value: str, *, allow_https: bool = True) -> str:
    if len(value) > 1024:
        raise fail(f"must be at most 1024 characters (got {len(value)})")
    match = S3_URI.match(value)
    if not match or (match.group(1) == "https" and not allow_https):
        raise fail(f"'{value}' is not an S3 URI; expected s3://bucket/prefix")
    return value


def check_role(value: str) -> str:
    problem = role_problem(value)
    if problem:
        raise fail(problem)
    return value


def check_version_string(value: Any) -> Any:
    if isinstance(value, bool | int | float):
        raise fail(
            f"write the version as a quoted string, e.g. '{value}' "
            "(YAML reads 1.10 as the number 1.1, which is a different version)"
        )
    return value


def version_tuple(version: str) -> tuple[int, ...] | None:
    """``"1.12.1"`` -> ``(1, 12, 1)``; None when not dotted numbers."""
    parts = version.split(".")
    if not all(p.isdigit() for p in parts):
        return None
    return tuple(int(p) for p in parts)
