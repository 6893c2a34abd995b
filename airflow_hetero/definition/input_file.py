"""Reading a definition or request file: YAML or JSON, within bounds, into a mapping (both forms use it).

:func:`read_definition_file` parses a file with readable errors (duplicate keys refused, syntax
errors by line and column) and bounds it first: size, nodes after alias expansion, depth, integers.
A file may come from anyone who can write to the DAG folder or pass a path to the CLI.
Without bounds a 926-byte YAML file of nested anchors expands to billions of nodes, a 61 MB file
takes minutes, 500 levels of nesting exhaust the recursion limit and a 5,000-digit integer hits
Python's int conversion limit, each ending in a traceback or worse. Each check here runs before the
expensive step it protects and fails with one line naming the file, the limit and how to change it:

* size: the file is read at most ``max_bytes + 1`` bytes far;
* depth and node count: a token scan (libyaml when available, never recursive) before parsing;
* nodes after alias expansion and depth through aliases: counted on the parsed node graph
  (each node once), before any Python object is built from it; recursive aliases are refused;
* integer digits: checked on each integer scalar before it is converted.

Limits come from :class:`InputLimits` (defaults below, or ``AIRFLOW_HETERO_MAX_DEFINITION_*``
environment variables). No Airflow, boto3 or botocore here.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from airflow_hetero.definition.errors import JobDefinitionError, Problem

ENV_PREFIX = "AIRFLOW_HETERO_MAX_DEFINITION_"
_INT_TAG = "tag:yaml.org,2002:int"
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?')


@dataclass(frozen=True)
class InputLimits:
    """How large a definition file may be; every field can be set by environment variable too."""

    #: Bytes in the file (``AIRFLOW_HETERO_MAX_DEFINITION_BYTES``).
    bytes: int = 1024 * 1024
    #: Values (mappings, lists, scalars) after YAML aliases are expanded (``..._NODES``).
    nodes: int = 20_000
    #: Levels of nested mappings/lists, through aliases too (``..._DEPTH``).
    depth: int = 32
    #: Digits in one integer (``..._INT_DIGITS``).
    int_digits: int = 64

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> InputLimits:
        """Defaults overridden by ``AIRFLOW_HETERO_MAX_DEFINITION_<FIELD>`` variables."""
        env = os.environ if environ is None else environ
        values: dict[str, int] = {}
        for item in fields(cls):
            raw = env.get(f"{ENV_PREFIX}{item.name.upper()}")
            if raw is None:
                continue
            try:
                value = int(raw)
            except ValueError:
                raise ValueError(f"{ENV_PREFIX}{item.name.upper()} must be a positive integer, got {raw!r}") from None
            if value < 1:
                raise ValueError(f"{ENV_PREFIX}{item.name.upper()} must be a positive integer, got {raw!r}")
            values[item.name] = value
        return cls(**values)

    def env_name(self, field: str) -> str:
        """The environment variable that sets ``field``."""
        return f"{ENV_PREFIX}{field.upper()}"


class InputLimitError(ValueError):
    """A definition file exceeds one of the :class:`InputLimits`; ``str()`` is one line."""

    def __init__(self, what: str, field: str, limits: InputLimits) -> None:
        limit = getattr(limits, field)
        super().__init__(f"{what}; the limit is {limit} ({field}, set {limits.env_name(field)} to change it)")
        self.field = field


def read_bounded(path: Path, limits: InputLimits) -> str:
    """The file's text, refusing it once it is longer than ``limits.bytes`` (never reads further)."""
    with path.open("rb") as handle:
        data = handle.read(limits.bytes + 1)
    if len(data) > limits.bytes:
        try:
            size = f"{path.stat().st_size} bytes"
        except OSError:
            size = "more bytes"
        raise InputLimitError(f"the file is {size}", "bytes", limits)
    return data.decode("utf-8")


# -- YAML ---------------------------------------------------------------------------------------


def scan_yaml(text: str, limits: InputLimits) -> None:
    """Refuse too deep or too many nodes by scanning tokens (before the recursive parser runs)."""
    import yaml
    from yaml import tokens

    loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    opening = (tokens.BlockMappingStartToken, tokens.BlockSequenceStartToken)
    flow_opening = (tokens.FlowMappingStartToken, tokens.FlowSequenceStartToken)
    closing = (tokens.BlockEndToken, tokens.FlowMappingEndToken, tokens.FlowSequenceEndToken)
    depth = nodes = 0
    for token in yaml.scan(text, Loader=loader):
        if isinstance(token, opening + flow_opening):
            depth += 1
            nodes += 1
            if depth > limits.depth:
                line = token.start_mark.line + 1
                raise InputLimitError(f"nesting deeper than {limits.depth} levels (line {line})", "depth", limits)
        elif isinstance(token, closing):
            depth -= 1
        elif isinstance(token, tokens.ScalarToken | tokens.AliasToken):
            nodes += 1
        if nodes > limits.nodes:
            raise InputLimitError(f"more than {limits.nodes} values", "nodes", limits)


def check_node_graph(root: Any, limits: InputLimits) -> None:
    """Count nodes and depth of a composed YAML graph as if every alias were expanded.

    Each node is visited once (sizes and depths of shared nodes are memoised), so an anchor bomb
    costs as much as its text; a node that contains itself (a recursive alias) is refused.
    """
    from yaml.nodes import MappingNode, ScalarNode, SequenceNode

    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()

    def children(node: Any) -> list[Any]:
        if isinstance(node, SequenceNode):
            return list(node.value)
        if isinstance(node, MappingNode):
            return [part for pair in node.value for part in pair]
        return []

    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            kids = children(node)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            depth[key] = (1 + max((depth[id(k)] for k in kids), default=0)) if kids else 0
            on_path.discard(key)
            if size[key] > limits.nodes:
                raise InputLimitError(
                    f"more than {limits.nodes} values once YAML aliases are expanded", "nodes", limits
                )
            if depth[key] > limits.depth:
                raise InputLimitError(
                    f"nesting deeper than {limits.depth} levels through YAML aliases", "depth", limits
                )
            continue
        if key in size:
            continue
        if isinstance(node, ScalarNode):
            if node.tag == _INT_TAG:
                check_int_text(str(node.value), limits, line=node.start_mark.line + 1)
            size[key], depth[key] = 1, 0
            continue
        if key in on_path:
            raise InputLimitError("a YAML alias refers to a value containing itself", "nodes", limits)
        on_path.add(key)
        stack.append((node, True))
        stack.extend((kid, False) for kid in children(node) if id(kid) not in size)


def check_int_text(text: str, limits: InputLimits, line: int | None = None) -> None:
    """Refuse an integer literal with more than ``limits.int_digits`` digits."""
    digits = sum(c.isalnum() for c in text)
    if digits > limits.int_digits:
        where = f" (line {line})" if line is not None else ""
        raise InputLimitError(f"an integer with {digits} digits{where}", "int_digits", limits)


# -- JSON ---------------------------------------------------------------------------------------


def scan_json(text: str, limits: InputLimits) -> None:
    """Refuse too deep, too many values or too long integers in JSON text, before ``json.loads``."""
    depth = nodes = 0
    for match in _JSON_TOKENS.finditer(text):
        token = match.group()
        first = token[0]
        if first in "[{":
            depth += 1
            nodes += 1
            if depth > limits.depth:
                raise InputLimitError(f"nesting deeper than {limits.depth} levels", "depth", limits)
        elif first in "]}":
            depth -= 1
        elif first == '"':
            nodes += 1
        else:
            nodes += 1
            if "." not in token and "e" not in token.lower():
                check_int_text(token.lstrip("-"), limits)
        if nodes > limits.nodes:
            raise InputLimitError(f"more than {limits.nodes} values", "nodes", limits)


def bounded_int(limits: InputLimits) -> Callable[[str], int]:
    """``parse_int`` for ``json.loads``: integers within ``limits.int_digits``."""

    def parse(text: str) -> int:
        check_int_text(text.lstrip("-"), limits)
        return int(text)

    return parse


def read_definition_file(path: Path, limits: InputLimits | None = None) -> dict[str, Any]:
    """Parse a YAML or JSON file (a definition or a request) into a mapping, with readable errors.

    ``limits`` (default: :meth:`InputLimits.from_env`) bound size, values after alias expansion,
    nesting and integer digits before each costly step (:class:`InputLimits`).
    """
    where = str(path)
    if limits is None:
        try:
            limits = InputLimits.from_env()
        except ValueError as err:  # a bad AIRFLOW_HETERO_MAX_DEFINITION_* value
            raise JobDefinitionError([Problem(where, str(err))], "cannot read definition") from None
    try:
        data = _parse_bounded(path, limits)
    except InputLimitError as err:
        raise JobDefinitionError([Problem(where, f"too large: {err}")], "definition too large") from None
    if data is None:
        raise JobDefinitionError([Problem(where, "file is empty")], "cannot parse definition")
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise JobDefinitionError(
            [Problem(where, f"top level must be a mapping of fields, not a {kind}")], "cannot parse definition"
        )
    return data


def _parse_bounded(path: Path, limits: InputLimits) -> Any:
    """The parsed file; JobDefinitionError when unreadable or malformed, InputLimitError past a limit."""
    import yaml

    where = str(path)
    try:
        text = read_bounded(path, limits)
    except FileNotFoundError:
        raise JobDefinitionError([Problem(where, "file not found")], "cannot read definition") from None
    except IsADirectoryError:
        raise JobDefinitionError([Problem(where, "is a directory, not a file")], "cannot read definition") from None
    except (OSError, UnicodeDecodeError) as err:
        raise JobDefinitionError([Problem(where, f"cannot be read: {err}")], "cannot read definition") from None
    try:
        if path.suffix.lower() == ".json":
            scan_json(text, limits)
            return json.loads(text, object_pairs_hook=_unique_json_keys, parse_int=bounded_int(limits))
        scan_yaml(text, limits)
        loader = _unique_keys_loader()(text)  # a SafeLoader subclass
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            check_node_graph(node, limits)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except (yaml.YAMLError, json.JSONDecodeError, _DuplicateKeyError) as err:
        detail = _syntax_detail(err)
        raise JobDefinitionError([Problem(where, f"syntax error: {detail}")], "cannot parse definition") from None


class _DuplicateKeyError(ValueError):
    """A key given twice in one mapping: the first value would be silently lost."""


def _unique_json_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKeyError(f"duplicate key '{key}' (the first value would be silently lost)")
        seen[key] = value
    return seen


def _unique_keys_loader() -> type[Any]:
    """PyYAML's SafeLoader, refusing duplicate keys instead of keeping the last one."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if isinstance(key, str) and key in seen:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"duplicate key '{key}' (the first value would be silently lost)",
                        key_node.start_mark,
                    )
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


def _syntax_detail(err: Exception) -> str:
    """``line 3, column 5: found unexpected end of stream`` for YAML and JSON errors."""
    mark = getattr(err, "problem_mark", None)
    if mark is not None:
        problem = getattr(err, "problem", None) or str(err)
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    if isinstance(err, json.JSONDecodeError):
        return f"line {err.lineno}, column {err.colno}: {err.msg}"
    return " ".join(str(err).split())
