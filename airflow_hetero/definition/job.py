"""Typed definitions of a SageMaker heterogeneous-cluster training job, and how to load one.

:class:`HeteroTrainingJob` is the job's fields (:mod:`airflow_hetero.definition.model`) plus its
cross-field rules (:mod:`airflow_hetero.definition.cross_field`). Every rule the service (or the SDK, or
the training container) would enforce later is checked here, at DAG-parse time, and all problems
are reported at once with the path of the field: see ``docs/definitions.md``.

This module imports neither Airflow nor boto3/botocore.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError, ValidatorFunctionWrapHandler, model_validator

from airflow_hetero.definition import checks, cross_field
from airflow_hetero.definition.errors import JobDefinitionError, Problem
from airflow_hetero.definition.input_limits import InputLimitError, InputLimits
from airflow_hetero.definition.model import InstanceGroup, JobFields, ShuffleConfig, TrainingInput

__all__ = [
    "HeteroTrainingJob",
    "InstanceGroup",
    "JobDefinitionError",
    "Problem",
    "ShuffleConfig",
    "TrainingInput",
    "load_job",
]


class HeteroTrainingJob(JobFields):
    """A whole training job: cluster, inputs, code, distribution and the rest of the estimator."""

    @model_validator(mode="wrap")
    @classmethod
    def _all_rules(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """Field errors and cross-field rules together, so every problem is reported at once."""
        line_errors: list[Any] = []
        job: HeteroTrainingJob | None = None
        try:
            job = handler(data)
        except ValidationError as err:
            line_errors.extend(checks.reraisable(err))
        # cross-field rules see coerced values when the fields are valid ("3" -> 3), else the raw input
        raw = job.model_dump() if job is not None else data
        if isinstance(raw, HeteroTrainingJob):
            raw = raw.model_dump()
        if isinstance(raw, Mapping):
            line_errors.extend(checks.line_error(loc, msg) for loc, msg in cross_field.cross_field(raw))
        if job is not None and not line_errors:
            line_errors.extend(checks.line_error(loc, msg) for loc, msg in cross_field.after_encoding(job))
        if line_errors:
            raise ValidationError.from_exception_data(cls.__name__, line_errors)
        return job


def load_job(
    source: str | Path | Mapping[str, Any] | HeteroTrainingJob, *, limits: InputLimits | None = None
) -> HeteroTrainingJob:
    """Load a definition from a YAML/JSON file, a mapping, or pass a definition through.

    Raises :class:`JobDefinitionError` for unreadable files, syntax errors, empty files, files
    beyond ``limits`` and invalid definitions alike, so callers handle one exception type.
    """
    if isinstance(source, HeteroTrainingJob):
        return source
    if isinstance(source, Mapping):
        return HeteroTrainingJob.model_validate(dict(source))
    data = read_definition_file(Path(source), limits)
    return HeteroTrainingJob.model_validate(data)


def read_definition_file(path: Path, limits: InputLimits | None = None) -> dict[str, Any]:
    """Parse a YAML or JSON definition file into a mapping, with readable errors.

    ``limits`` (default: :meth:`InputLimits.from_env`) bound size, values after alias expansion,
    nesting and integer digits before each costly step (:mod:`airflow_hetero.definition.input_limits`).
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

    from airflow_hetero.definition import input_limits

    where = str(path)
    try:
        text = input_limits.read_bounded(path, limits)
    except FileNotFoundError:
        raise JobDefinitionError([Problem(where, "file not found")], "cannot read definition") from None
    except IsADirectoryError:
        raise JobDefinitionError([Problem(where, "is a directory, not a file")], "cannot read definition") from None
    except (OSError, UnicodeDecodeError) as err:
        raise JobDefinitionError([Problem(where, f"cannot be read: {err}")], "cannot read definition") from None
    try:
        if path.suffix.lower() == ".json":
            input_limits.scan_json(text, limits)
            return json.loads(text, object_pairs_hook=_unique_json_keys, parse_int=input_limits.bounded_int(limits))
        input_limits.scan_yaml(text, limits)
        loader = _unique_keys_loader()(text)  # a SafeLoader subclass
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            input_limits.check_node_graph(node, limits)
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
