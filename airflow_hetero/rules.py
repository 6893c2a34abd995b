"""The rules a training-job definition must follow, with the messages users see.

Single-field checks are called from field validators; ``cross_field`` checks rules that
span fields on the raw definition, so they run (and report) even when some field is
invalid. The ``distribution`` rules live in :mod:`airflow_hetero.distribution_rules`.
``docs/definitions.md`` lists every rule; a test keeps the two in step.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from pydantic_core import PydanticCustomError

from airflow_hetero import distribution_rules, instance_types
from airflow_hetero.distribution_rules import STRATEGIES, Finding, Loc, distribution_group
from airflow_hetero.naming import MAX_BASE_JOB_NAME, check_base_job_name

if TYPE_CHECKING:
    from airflow_hetero.spec import HeteroTrainingJob

MAX_GROUPS = 5
MAX_CHANNELS = 20
MAX_HYPERPARAMETERS = 100
MAX_HP_KEY = 256
MAX_HP_VALUE = 2500
MAX_ENV = 100
ROLE_ARN = re.compile(r"^arn:aws[a-z\-]*:iam::\d{12}:role/?[a-zA-Z_0-9+=,.@\-_/]+$")
S3_URI = re.compile(r"^(https|s3)://([^/]+)/?(.*)$")
CHANNEL_NAME = re.compile(r"^[A-Za-z0-9\.\-_]+$")
ENV_KEY = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
HETERO_MINIMUM = {"pytorch": (1, 10), "tensorflow": (2, 6)}


def fail(msg: str) -> PydanticCustomError:
    """An error whose message is shown as is (no 'Value error,' prefix, braces kept)."""
    return PydanticCustomError("hetero_rule", msg)  # no context given: braces are shown as written


def line_error(loc: Loc, msg: str) -> dict[str, Any]:
    """A pydantic line error for ``ValidationError.from_exception_data``."""
    return {"type": fail(msg), "loc": loc, "input": None}


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
    if value.startswith("local"):
        raise fail(
            f"'{value}' runs SageMaker's local mode, which cannot run heterogeneous clusters; "
            "keep a real instance type (e.g. ml.c5.xlarge) and point the connection at the "
            "offline endpoint instead (`airflow-hetero local serve`, see docs/local.md)"
        )
    known = instance_types.training_instance_types()
    if value not in known:
        hint = instance_types.closest(value)
        did_you_mean = f"did you mean '{hint}'? " if hint else ""
        raise fail(
            f"'{value}' is not a SageMaker training instance type; {did_you_mean}"
            f"allowed: the {len(known)} values of botocore's TrainingInstanceType "
            "(list them with `airflow-hetero instance-types`)"
        )
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
    if not ROLE_ARN.match(value) or not 20 <= len(value) <= 2048:
        raise fail(
            f"'{value}' is not an IAM role ARN; expected arn:aws:iam::<12-digit account>:role/<name> "
            "(a bare role name would need an IAM call to expand, so give the full ARN)"
        )
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


# --- cross-field rules --------------------------------------------------------------------------


def cross_field(raw: Mapping[str, Any]) -> Iterator[Finding]:
    """Rules spanning several fields, checked on the raw definition (tolerant of bad fields)."""
    groups = _groups(raw)
    names = list(
        dict.fromkeys(g["instance_group_name"] for g in groups if isinstance(g.get("instance_group_name"), str))
    )
    yield from _cluster(raw, groups, names)
    yield from _channels(raw, names)
    yield from distribution_rules.check(raw, groups, names)
    yield from _code(raw)
    yield from _misc(raw)
    yield from _hyperparameters(raw)


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump() if callable(dump) else value


def _groups(raw: Mapping[str, Any]) -> list[dict[str, Any]]:
    groups = raw.get("instance_groups")
    if not isinstance(groups, list):
        return []
    return [g for g in (_plain(x) for x in groups) if isinstance(g, dict)]


def _cluster(raw: Mapping[str, Any], groups: list[dict[str, Any]], names: list[str]) -> Iterator[Finding]:
    has_groups = raw.get("instance_groups") is not None
    has_type = raw.get("instance_type") is not None
    has_count = raw.get("instance_count") is not None
    if has_groups and (has_type or has_count):
        field = "instance_type" if has_type else "instance_count"
        yield (
            (field,),
            (
                "give either instance_groups (heterogeneous cluster) or instance_type + instance_count "
                "(homogeneous cluster), not both"
            ),
        )
    elif not has_groups and not (has_type and has_count):
        missing = "instance_count" if has_type else "instance_type" if has_count else "instance_groups"
        yield (
            (missing,),
            (
                "the cluster is not defined: give instance_groups (heterogeneous cluster) "
                "or instance_type + instance_count (homogeneous cluster)"
            ),
        )
    seen: dict[str, int] = {}
    for index, name in enumerate(g.get("instance_group_name") for g in groups):
        if isinstance(name, str) and name in seen:
            yield (
                ("instance_groups", index, "instance_group_name"),
                (
                    f"duplicate group name '{name}' (already used by instance_groups[{seen[name]}]); "
                    "group names must be unique"
                ),
            )
        elif isinstance(name, str):
            seen[name] = index


def _channels(raw: Mapping[str, Any], names: list[str]) -> Iterator[Finding]:
    inputs = raw.get("inputs")
    if not isinstance(inputs, Mapping):
        return
    hetero = raw.get("instance_groups") is not None
    known = ", ".join(names) or "(none)"
    for channel, value in inputs.items():
        if not CHANNEL_NAME.match(str(channel)) or len(str(channel)) > 64:
            yield (
                ("inputs", str(channel)),
                (f"channel name '{channel}' is invalid; use 1 to 64 letters, digits, '.', '-' or '_'"),
            )
        spec = _plain(value)
        chosen = spec.get("instance_groups") if isinstance(spec, dict) else None
        if not isinstance(chosen, list):
            continue
        loc: Loc = ("inputs", str(channel), "instance_groups")
        if not hetero:
            yield loc, "channels can name instance groups only in a heterogeneous job (one with instance_groups)"
            continue
        for name in chosen:
            if isinstance(name, str) and name not in names:
                yield loc, f"unknown instance group '{name}'; the job's groups are: {known}"
        dupes = sorted({n for n in chosen if isinstance(n, str) and chosen.count(n) > 1})
        if dupes:
            yield loc, f"group {', '.join(repr(d) for d in dupes)} listed more than once"


def _code(raw: Mapping[str, Any]) -> Iterator[Finding]:
    framework = raw.get("framework")
    image_uri = raw.get("image_uri")
    if framework is None and image_uri is None:
        yield ("framework",), "give framework (pytorch or tensorflow) + framework_version + py_version, or image_uri"
    if framework is not None and image_uri is None:
        for field in ("framework_version", "py_version"):
            if raw.get(field) is None:
                yield (field,), f"required with framework '{framework}' unless image_uri is given"
    if framework is not None and raw.get("entry_point") is None:
        yield ("entry_point",), f"required with framework '{framework}': the script the container runs"
    for field in ("framework_version", "py_version"):
        if raw.get(field) is not None and framework is None:
            yield (field,), "only meaningful with framework (pytorch or tensorflow)"
    version = raw.get("framework_version")
    minimum = HETERO_MINIMUM.get(framework) if isinstance(framework, str) else None
    if raw.get("instance_groups") is not None and isinstance(version, str) and minimum is not None:
        parsed = version_tuple(version)
        if parsed is None:
            yield ("framework_version",), f"'{version}' is not a version number such as '1.13.1'"
        elif parsed < minimum:
            floor = ".".join(map(str, minimum))
            yield ("framework_version",), (f"heterogeneous clusters need {framework} {floor} or newer (got {version})")
    yield from _framework_image(raw)
    entry, source = raw.get("entry_point"), raw.get("source_dir")
    if isinstance(entry, str) and isinstance(source, str):
        parts = entry.replace("\\", "/").split("/")
        if entry.startswith("/") or ".." in parts or entry.lower().startswith("s3://"):
            yield ("entry_point",), (f"'{entry}' must be a path relative to source_dir (no leading '/', no '..')")
    if isinstance(source, str) and source.lower().startswith("s3://") and not source.endswith(".tar.gz"):
        yield ("source_dir",), f"'{source}' must point to a .tar.gz file when it is an S3 URI"
    output = raw.get("output_path")
    local_code = entry is not None and not (isinstance(source, str) and source.lower().startswith("s3://"))
    if local_code and isinstance(output, str) and output.lower().startswith("https://"):
        yield (
            ("output_path",),
            (
                "local code is uploaded to the output bucket, so give output_path as s3://bucket/prefix "
                "(or put the code in S3 and set source_dir to its .tar.gz)"
            ),
        )
    base = raw.get("base_job_name")
    if isinstance(base, str):
        problem = check_base_job_name(base)
        if problem:
            yield ("base_job_name",), problem


def _framework_image(raw: Mapping[str, Any]) -> Iterator[Finding]:
    """Without image_uri, a Deep Learning Container must exist for the framework version and Python."""
    framework, version, py = raw.get("framework"), raw.get("framework_version"), raw.get("py_version")
    if raw.get("image_uri") is not None or framework not in HETERO_MINIMUM:
        return
    from airflow_hetero.images import ImageLookupError, check_py_version, resolve_version

    if isinstance(version, str):
        try:
            resolve_version(str(framework), version)
        except ImageLookupError as err:
            yield ("framework_version",), str(err)
            return
        if isinstance(py, str):
            try:
                check_py_version(str(framework), version, py)
            except ImageLookupError as err:
                yield ("py_version",), str(err)


def _misc(raw: Mapping[str, Any]) -> Iterator[Finding]:
    spot, max_wait, max_run = raw.get("use_spot_instances"), raw.get("max_wait"), raw.get("max_run", 86400)
    if spot is True and max_wait is None:
        yield ("max_wait",), "required with use_spot_instances: how long to wait for spot capacity plus the run"
    if max_wait is not None and spot is not True:
        yield ("max_wait",), "only allowed with use_spot_instances: true"
    if spot is True and isinstance(max_wait, int) and isinstance(max_run, int) and max_wait < max_run:
        yield ("max_wait",), f"must be at least max_run ({max_run}), since it includes the run (got {max_wait})"
    if raw.get("checkpoint_local_path") is not None and raw.get("checkpoint_s3_uri") is None:
        yield ("checkpoint_local_path",), "needs checkpoint_s3_uri: the S3 location checkpoints are synced to"
    subnets, sgs = raw.get("subnets"), raw.get("security_group_ids")
    if (subnets is None) != (sgs is None):
        missing = "security_group_ids" if sgs is None else "subnets"
        yield (missing,), "a VPC needs both subnets and security_group_ids"
    for field, value in (("subnets", subnets), ("security_group_ids", sgs)):
        if isinstance(value, list) and not 1 <= len(value) <= (16 if field == "subnets" else 5):
            limit = 16 if field == "subnets" else 5
            yield (field,), f"give 1 to {limit} entries (got {len(value)})"
    yield from _environment(raw.get("environment"))
    yield from _tags(raw.get("tags"))
    yield from _metric_definitions(raw.get("metric_definitions"))


def _environment(env: Any) -> Iterator[Finding]:
    if not isinstance(env, Mapping):
        return
    if len(env) > MAX_ENV:
        yield ("environment",), f"at most {MAX_ENV} variables (got {len(env)})"
    for key, value in env.items():
        if not isinstance(key, str) or not ENV_KEY.match(key) or len(key) > 512:
            yield ("environment", str(key)), "variable names are letters, digits and '_', not starting with a digit"
        if isinstance(value, str) and len(value) > 512:
            yield ("environment", str(key)), f"value is {len(value)} characters; at most 512"


def _tags(tags: Any) -> Iterator[Finding]:
    if not isinstance(tags, list):
        return
    for index, tag in enumerate(tags):
        if not isinstance(tag, Mapping):
            continue
        if set(tag) != {"Key", "Value"}:
            yield ("tags", index), "each tag is {Key: ..., Value: ...}"
            continue
        key, value = tag["Key"], tag["Value"]
        if isinstance(key, str) and not 1 <= len(key) <= 128:
            yield ("tags", index, "Key"), "must be 1 to 128 characters"
        if isinstance(key, str) and key.lower().startswith("aws:"):
            yield ("tags", index, "Key"), "the 'aws:' prefix is reserved by AWS"
        if isinstance(value, str) and len(value) > 256:
            yield ("tags", index, "Value"), "must be at most 256 characters"


def _metric_definitions(defs: Any) -> Iterator[Finding]:
    if not isinstance(defs, list):
        return
    for index, item in enumerate(defs):
        if not isinstance(item, Mapping):
            continue
        if set(item) != {"Name", "Regex"}:
            yield ("metric_definitions", index), "each metric definition is {Name: ..., Regex: ...}"
            continue
        name, regex = item["Name"], item["Regex"]
        if isinstance(name, str) and not 1 <= len(name) <= 255:
            yield ("metric_definitions", index, "Name"), "must be 1 to 255 characters"
        if isinstance(regex, str):
            if not 1 <= len(regex) <= 500:
                yield ("metric_definitions", index, "Regex"), "must be 1 to 500 characters"
            try:
                compiled = re.compile(regex)
            except re.error as err:
                yield ("metric_definitions", index, "Regex"), f"does not compile: {err}"
            else:
                if compiled.groups < 1:
                    yield (
                        ("metric_definitions", index, "Regex"),
                        ("needs a capture group around the number, e.g. 'loss=([0-9.]+)'"),
                    )


def _hyperparameters(raw: Mapping[str, Any]) -> Iterator[Finding]:
    """Reserved names and length limits, on the values as they will be sent."""
    from airflow_hetero.hyperparameters import RESERVED, user_hyperparameters

    values = raw.get("hyperparameters")
    if not isinstance(values, Mapping):
        return
    try:
        json_values = raw.get("framework") is not None or raw.get("source_dir") is not None
        encoded = user_hyperparameters(values, json_values=json_values)
    except (TypeError, ValueError):
        return  # a value JSON cannot encode: reported by the field validator
    for key, value in encoded.items():
        if key in RESERVED:
            yield ("hyperparameters", key), f"'{key}' is set by airflow-hetero from the definition; remove it"
        if len(key) > MAX_HP_KEY:
            yield ("hyperparameters", key), f"name is {len(key)} characters; at most {MAX_HP_KEY}"
        if len(value) > MAX_HP_VALUE:
            how = "once JSON-encoded" if json_values else "as a string"
            yield ("hyperparameters", key), f"value is {len(value)} characters {how}; at most {MAX_HP_VALUE}"


def after_encoding(job: HeteroTrainingJob) -> Iterator[Finding]:
    """The entry count, on what the SDK would send (with its sagemaker_* keys); needs a valid job."""
    from airflow_hetero.hyperparameters import sdk_hyperparameters

    encoded = sdk_hyperparameters(job, job_name="x" * 63, region="ap-southeast-3")
    if len(encoded) > MAX_HYPERPARAMETERS:
        yield (
            ("hyperparameters",),
            (
                f"{len(encoded)} entries after adding the SDK's sagemaker_* keys; SageMaker allows "
                f"at most {MAX_HYPERPARAMETERS}"
            ),
        )


__all__ = ["MAX_BASE_JOB_NAME", "STRATEGIES", "Finding", "Loc", "cross_field", "distribution_group"]
