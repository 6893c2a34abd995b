"""Check a request against the min/max/pattern/enum constraints of botocore's service model.

SageMaker validates every member against its Smithy model and answers with one message listing
the violations ("2 validation errors detected: Value 'x' at 'trainingJobName' failed to satisfy
constraint: ..."). botocore's client-side validation checks only required members, types and
minimums, so a long job name, seven instance groups or an unknown instance type pass the client
and must be refused here, from the same model the client was built from (never a hand-copied list).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from airflow_hetero.local.api.errors import ServiceError, validation


@functools.cache
def service_model(service: str = "sagemaker") -> Any:
    import botocore.session

    return botocore.session.get_session().get_service_model(service)


@functools.cache
def _compiled(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except re.error:  # a Java-only construct: the service checks it, we cannot
        return None


def _camel(name: str) -> str:
    return name[:1].lower() + name[1:]


def _show(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={_show(v)}" for k, v in value.items()) + "}"
    return str(value)


def _fail(problems: list[str], value: Any, loc: str, rule: str) -> None:
    problems.append(f"Value '{_show(value)}' at '{loc}' failed to satisfy constraint: {rule}")


def _check_length(shape: Any, value: Any, loc: str, problems: list[str]) -> None:
    meta = shape.metadata
    size = len(value)
    if "min" in meta and size < meta["min"]:
        _fail(problems, value, loc, f"Member must have length greater than or equal to {meta['min']}")
    if "max" in meta and size > meta["max"]:
        _fail(problems, value, loc, f"Member must have length less than or equal to {meta['max']}")


def _member_loc(loc: str, name: str) -> str:
    return f"{loc}.{_camel(name)}" if loc else _camel(name)


def _walk_structure(shape: Any, value: Any, loc: str, problems: list[str]) -> None:
    """Required members first, then each member present, in the model's order."""
    if not isinstance(value, dict):
        return
    for required in shape.required_members:
        if value.get(required) is None:
            where = _member_loc(loc, required)
            problems.append(f"Value null at '{where}' failed to satisfy constraint: Member must not be null")
    for name, member in shape.members.items():
        if value.get(name) is not None:
            _walk(member, value[name], _member_loc(loc, name), problems)


def _walk_list(shape: Any, value: Any, loc: str, problems: list[str]) -> None:
    """The list's length, then each item (``loc.N.member``, counted from 1 as the service does)."""
    if not isinstance(value, list):
        return
    _check_length(shape, value, loc, problems)
    for index, item in enumerate(value, start=1):
        _walk(shape.member, item, f"{loc}.{index}.member", problems)


def _walk_map(shape: Any, value: Any, loc: str, problems: list[str]) -> None:
    """The map's size, then each key (``loc.key``) and its value (``loc.<key>``)."""
    if not isinstance(value, dict):
        return
    _check_length(shape, value, loc, problems)
    for key, item in value.items():
        _walk(shape.key, key, f"{loc}.key", problems)
        _walk(shape.value, item, f"{loc}.{key}", problems)


def _check_string(shape: Any, value: Any, loc: str, problems: list[str]) -> None:
    """Length, enum and pattern (a pattern Python cannot compile is left to the service)."""
    if not isinstance(value, str):
        return
    meta = shape.metadata
    _check_length(shape, value, loc, problems)
    if "enum" in meta and value not in meta["enum"]:
        _fail(problems, value, loc, "Member must satisfy enum value set: [" + ", ".join(meta["enum"]) + "]")
    pattern = _compiled(meta["pattern"]) if "pattern" in meta else None
    if pattern is not None and pattern.fullmatch(value) is None:
        _fail(problems, value, loc, f"Member must satisfy regular expression pattern: {meta['pattern']}")


def _check_integer(shape: Any, value: Any, loc: str, problems: list[str]) -> None:
    """The value's bounds (a bool is no integer here, whatever Python says)."""
    if not isinstance(value, int) or isinstance(value, bool):
        return
    meta = shape.metadata
    if "min" in meta and value < meta["min"]:
        _fail(problems, value, loc, f"Member must have value greater than or equal to {meta['min']}")
    if "max" in meta and value > meta["max"]:
        _fail(problems, value, loc, f"Member must have value less than or equal to {meta['max']}")


#: One check per kind of shape; other kinds (booleans, floats, timestamps, blobs) are not checked,
#: and a value of the wrong type is left to botocore's own validation.
_BY_KIND: dict[str, Callable[[Any, Any, str, list[str]], None]] = {
    "structure": _walk_structure,
    "list": _walk_list,
    "map": _walk_map,
    "string": _check_string,
    "integer": _check_integer,
    "long": _check_integer,
}


def _walk(shape: Any, value: Any, loc: str, problems: list[str]) -> None:
    """Append every violation of ``value`` (at ``loc``) against ``shape`` and its members."""
    check = _BY_KIND.get(shape.type_name)
    if check is not None:
        check(shape, value, loc, problems)


def constraint_problems(operation: str, params: dict[str, Any], service: str = "sagemaker") -> list[str]:
    """All constraint violations of ``params`` for ``operation`` of ``service``, in the service's wording."""
    problems: list[str] = []
    _walk(service_model(service).operation_model(operation).input_shape, params, "", problems)
    return problems


def check_constraints(operation: str, params: dict[str, Any], service: str = "sagemaker") -> None:
    """Raise the service's ``ValidationException`` when ``params`` break the model's constraints."""
    problems = constraint_problems(operation, params, service)
    if problems:
        raise constraint_error(problems)


def constraint_error(problems: list[str], code: str = "ValidationException") -> ServiceError:
    """One refusal (``code``, SageMaker's ValidationException by default) listing every problem, as AWS words it."""
    count = len(problems)
    noun = "error" if count == 1 else "errors"
    message = f"{count} validation {noun} detected: " + "; ".join(problems)
    return validation(message) if code == "ValidationException" else ServiceError(code, message)


def training_instance_types() -> frozenset[str]:
    """The ``TrainingInstanceType`` enum of the installed botocore (never hand-copied)."""
    return frozenset(service_model().shape_for("TrainingInstanceType").enum)
