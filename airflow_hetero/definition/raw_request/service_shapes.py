"""botocore's shape rules for one operation's input, read from the service model JSON (no botocore).

Required members, member names, types, enums, patterns, lengths and bounds, exactly as botocore's
``service-2.json`` states them: never a hand copy. The model is 2.5 MB of JSON (~0.2 s to load),
so the shapes one operation's input reaches are compiled once and kept on disk, in the package's
cache folder (:func:`airflow_hetero.cache_folder`), keyed on the model file's
path, size and times; a later process loads the small file instead (checking a request in a fresh
process, no validation marker: 27.7 ms CPU with the compiled shapes on disk, 56.2 ms compiling them;
a definition costs 169 ms; medians of 7, 2026-12).

:func:`check` walks a value against those shapes and returns a :class:`ShapeProblem` per
violation, each with the request path (``InputDataConfig[1].ChannelName``), our message, and the
service's own location and wording (``inputDataConfig.2.member.channelName``) for the offline
endpoint. Strings where the shape wants a number or a boolean (what Jinja renders) are converted
when ``coerce`` is set, or refused with their path.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from airflow_hetero.definition.errors import Loc, Problem

__all__ = ["OperationShapes", "ShapeProblem", "check", "operation_shapes"]

#: Bump when the compiled layout changes: an old cache file is then only a miss.
_LAYOUT = 1
_KEPT = ("type", "required", "min", "max", "pattern", "enum")
#: An enum longer than this is named, not listed, in our messages (instance types: hundreds).
_LISTED_ENUM = 12
_NOUNS = {
    "structure": "an object",
    "list": "a list",
    "map": "a mapping",
    "string": "a string",
    "integer": "an integer",
    "long": "an integer",
    "boolean": "true or false",
    "float": "a number",
    "double": "a number",
}


@dataclass(frozen=True)
class OperationShapes:
    """The input shape of one operation and every shape it reaches (name -> compact shape)."""

    service: str
    operation: str
    input: str
    shapes: dict[str, dict[str, Any]]

    def members(self, shape: str) -> dict[str, str]:
        """A structure's member names -> their shape names, in the model's order."""
        return dict(self.shapes[shape].get("members", {}))


@dataclass(frozen=True)
class ShapeProblem:
    """One violation: where (request path and the service's location), what, and both wordings."""

    path: Loc
    wire: str
    msg: str
    rule: str = ""  # the service's "Member must ..." sentence; empty for required/unknown/type
    value: Any = field(default=None, compare=False)
    kind: str = "constraint"  # "required", "unknown", "type" or "constraint"

    def problem(self) -> Problem:
        """As a definition problem: ``InputDataConfig[1].ChannelName: <our message>``."""
        return Problem(self.path, self.msg)

    def service_message(self) -> str:
        """SageMaker's wording: ``Value 'x' at 'trainingJobName' failed to satisfy constraint: ...``."""
        if self.kind == "required":
            return f"Value null at '{self.wire}' failed to satisfy constraint: Member must not be null"
        return f"Value '{_show(self.value)}' at '{self.wire}' failed to satisfy constraint: {self.rule}"


# --- the compiled model -------------------------------------------------------------------------


@functools.cache
def operation_shapes(operation: str, service: str = "sagemaker") -> OperationShapes:
    """The shapes of ``operation``'s input, from the disk cache or compiled from the model."""
    from airflow_hetero.definition.facts.service_model import service_model_path

    model = str(service_model_path(service))
    cached = _cache_file(model, service, operation)
    if cached is not None:
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            with open(cached, encoding="utf-8") as file:
                data = json.load(file)
            return OperationShapes(service, operation, data["input"], data["shapes"])
    name, shapes = _compile(model, operation)
    if cached is not None:
        _store(cached, {"input": name, "shapes": shapes})
    return OperationShapes(service, operation, name, shapes)


def _cache_file(model: str, service: str, operation: str) -> str | None:
    from airflow_hetero import cache_folder

    folder = cache_folder()
    try:
        st = os.stat(model)
    except OSError:
        return None
    if folder is None:
        return None
    stamp = f"{_LAYOUT}\0{model}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}"
    key = hashlib.blake2b(stamp.encode(), digest_size=16)
    return os.path.join(folder, "shapes", f"{service}-{operation}-{key.hexdigest()}.json")


def _store(path: str, data: dict[str, Any]) -> None:
    """Write atomically; a folder that cannot be written only means compiling every time."""
    partial = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(partial, "w", encoding="utf-8") as file:
            json.dump(data, file, separators=(",", ":"))
        os.replace(partial, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(partial)


def _compile(model: str, operation: str) -> tuple[str, dict[str, dict[str, Any]]]:
    opener: Callable[..., Any] = gzip.open if model.endswith(".gz") else open
    with opener(model, "rt", encoding="utf-8") as file:
        document = json.load(file)
    root = document["operations"][operation]["input"]["shape"]
    every = document["shapes"]
    out: dict[str, dict[str, Any]] = {}
    pending = [root]
    while pending:
        name = pending.pop()
        if name in out:
            continue
        shape = every[name]
        compact = {k: shape[k] for k in _KEPT if k in shape}
        if "members" in shape:
            compact["members"] = {m: spec["shape"] for m, spec in shape["members"].items()}
            pending.extend(compact["members"].values())
        for part in ("member", "key", "value"):
            if part in shape:
                compact[part] = shape[part]["shape"]
                pending.append(shape[part]["shape"])
        out[name] = compact
    return root, out


# --- the walk -------------------------------------------------------------------------------------


@dataclass
class _Walk:
    shapes: OperationShapes
    coerce: bool
    problems: list[ShapeProblem] = field(default_factory=list)

    def add(self, path: Loc, wire: str, msg: str, **kw: Any) -> None:
        self.problems.append(ShapeProblem(path, wire, msg, **kw))

    def value(self, name: str, value: Any, path: Loc, wire: str) -> Any:
        """``value`` checked against shape ``name``; returned converted when ``coerce`` allows."""
        shape = self.shapes.shapes[name]
        kind = shape["type"]
        value = self.converted(kind, value, path, wire) if isinstance(value, str) and kind != "string" else value
        if not _is(kind, value):
            self.add(path, wire, f"expected {_NOUNS.get(kind, kind)}, got {_describe(value)}", kind="type", value=value)
            return value
        walker = _WALKERS.get(kind)
        return walker(self, name, shape, value, path, wire) if walker is not None else value

    def converted(self, kind: str, value: str, path: Loc, wire: str) -> Any:
        """A rendered string where a number or boolean belongs: converted, or left to be refused."""
        if not self.coerce:
            return value
        text = value.strip()
        if kind in ("integer", "long") and re.fullmatch(r"[+-]?\d{1,19}", text):
            return int(text)
        if kind == "boolean" and text.lower() in ("true", "false"):
            return text.lower() == "true"
        if kind in ("float", "double"):
            with contextlib.suppress(ValueError):
                return float(text)
        return value

    def structure(self, name: str, shape: dict[str, Any], value: dict[str, Any], path: Loc, wire: str) -> Any:
        members: dict[str, str] = shape.get("members", {})
        for required in shape.get("required", ()):
            if value.get(required) is None:
                self.add((*path, required), _member_wire(wire, required), "field required", kind="required")
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key not in members:
                self.add((*path, key), _member_wire(wire, str(key)), _unknown(str(key), members), kind="unknown")
                out[key] = item
            elif item is None:
                out[key] = item
            else:
                out[key] = self.value(members[key], item, (*path, key), _member_wire(wire, key))
        return out

    def list(self, name: str, shape: dict[str, Any], value: list[Any], path: Loc, wire: str) -> Any:
        self.length(shape, value, path, wire, "item")
        return [self.value(shape["member"], v, (*path, i), f"{wire}.{i + 1}.member") for i, v in enumerate(value)]

    def map(self, name: str, shape: dict[str, Any], value: dict[str, Any], path: Loc, wire: str) -> Any:
        self.length(shape, value, path, wire, "entry")
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                self.add((*path, str(key)), f"{wire}.key", f"keys must be strings, got {_describe(key)}", kind="type")
                continue
            before = len(self.problems)
            self.value(shape["key"], key, (*path, key), f"{wire}.key")
            for i in range(before, len(self.problems)):  # a key's problem says it is the key
                p = self.problems[i]
                self.problems[i] = ShapeProblem(p.path, p.wire, f"key: {p.msg}", p.rule, p.value, p.kind)
            out[key] = self.value(shape["value"], item, (*path, key), f"{wire}.{key}")
        return out

    def string(self, name: str, shape: dict[str, Any], value: str, path: Loc, wire: str) -> Any:
        self.length(shape, value, path, wire, "character")
        enum = shape.get("enum")
        if enum is not None and value not in enum:
            rule = "Member must satisfy enum value set: [" + ", ".join(enum) + "]"
            self.add(path, wire, _not_in_enum(value, name, enum), rule=rule, value=value)
        pattern = shape.get("pattern")
        compiled = _compiled(pattern) if pattern is not None else None
        if compiled is not None and compiled.fullmatch(value) is None:
            rule = f"Member must satisfy regular expression pattern: {pattern}"
            msg = f"'{_clip(value)}' does not match botocore's {name} pattern {pattern}"
            self.add(path, wire, msg, rule=rule, value=value)
        return value

    def number(self, name: str, shape: dict[str, Any], value: int | float, path: Loc, wire: str) -> Any:
        if "min" in shape and value < shape["min"]:
            rule = f"Member must have value greater than or equal to {shape['min']}"
            self.add(path, wire, f"must be at least {shape['min']} (got {value})", rule=rule, value=value)
        if "max" in shape and value > shape["max"]:
            rule = f"Member must have value less than or equal to {shape['max']}"
            self.add(path, wire, f"must be at most {shape['max']} (got {value})", rule=rule, value=value)
        return value

    def length(self, shape: dict[str, Any], value: Any, path: Loc, wire: str, unit: str) -> None:
        size = len(value)
        if "min" in shape and size < shape["min"]:
            rule = f"Member must have length greater than or equal to {shape['min']}"
            msg = f"must have at least {shape['min']} {_plural(unit, shape['min'])} (got {size})"
            self.add(path, wire, msg, rule=rule, value=value)
        if "max" in shape and size > shape["max"]:
            rule = f"Member must have length less than or equal to {shape['max']}"
            msg = f"must have at most {shape['max']} {_plural(unit, shape['max'])} (got {size})"
            self.add(path, wire, msg, rule=rule, value=value)


_WALKERS: dict[str, Callable[..., Any]] = {
    "structure": _Walk.structure,
    "list": _Walk.list,
    "map": _Walk.map,
    "string": _Walk.string,
    "integer": _Walk.number,
    "long": _Walk.number,
    "float": _Walk.number,
    "double": _Walk.number,
}


def check(shapes: OperationShapes, params: Any, *, coerce: bool = False) -> tuple[Any, list[ShapeProblem]]:
    """``params`` checked against the operation's input: (the value, converted if ``coerce``; problems)."""
    walk = _Walk(shapes, coerce)
    value = walk.value(shapes.input, params, (), "")
    return value, walk.problems


def _is(kind: str, value: Any) -> bool:
    """Whether ``value`` has the JSON type of a shape of ``kind`` (a bool is no number here)."""
    if kind in {"structure", "map"}:
        return isinstance(value, dict)
    if kind == "list":
        return isinstance(value, list | tuple)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind in ("integer", "long"):
        return isinstance(value, int) and not isinstance(value, bool)
    if kind in ("float", "double"):
        return isinstance(value, int | float) and not isinstance(value, bool)
    return True  # timestamps, blobs: not in a training request's input


@functools.cache
def _compiled(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except re.error:  # a Java-only construct (\p{Alnum}): the service checks it, we cannot
        return None


def _member_wire(wire: str, name: str) -> str:
    camel = name[:1].lower() + name[1:]
    return f"{wire}.{camel}" if wire else camel


def _plural(unit: str, count: int) -> str:
    if count == 1:
        return unit
    return "entries" if unit == "entry" else f"{unit}s"


def _clip(value: str, limit: int = 80) -> str:
    return value if len(value) <= limit else value[: limit - 3] + "..."


def _describe(value: Any) -> str:
    if isinstance(value, str):
        return f"the string '{_clip(value)}'"
    if isinstance(value, bool):
        return f"{str(value).lower()}"
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    return f"{type(value).__name__} {value!r}"


def _closest(name: str, options: Iterable[str]) -> str:
    import difflib  # only when there is a problem to explain

    hint = difflib.get_close_matches(name, list(options), n=1, cutoff=0.6)
    return f"; did you mean '{hint[0]}'?" if hint else ""


def _unknown(key: str, members: dict[str, str]) -> str:
    return f"unknown field '{key}'{_closest(key, members)} (allowed: {', '.join(sorted(members))})"


def _not_in_enum(value: str, name: str, enum: list[str]) -> str:
    hint = _closest(value, enum)
    if len(enum) <= _LISTED_ENUM:
        return f"'{_clip(value)}' is not allowed{hint} (allowed: {', '.join(enum)})"
    listing = " (list them with `airflow-hetero instance-types`)" if name == "TrainingInstanceType" else ""
    return f"'{_clip(value)}' is not one of the {len(enum)} values of botocore's {name}{hint}{listing}"


def _show(value: Any) -> str:
    """A value as the service prints it in a constraint message (lists and maps in its notation)."""
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={_show(v)}" for k, v in value.items()) + "}"
    return str(value)
