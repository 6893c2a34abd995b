"""The cross-field rules a training-job definition must follow, with the messages users see.

``cross_field`` checks rules that span fields on the raw definition, so they run (and report)
even when some field is invalid (what only the encoded request shows is checked by
:func:`airflow_hetero.definition.job.after_encoding`, on a valid job).
Single-field checks live in :mod:`airflow_hetero.definition.rules.checks`, the ``distribution`` rules in
:mod:`airflow_hetero.definition.rules.distribution`. ``docs/definitions.md`` lists every rule; a
test keeps the two in step.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from airflow_hetero.definition.display import confusable_hint
from airflow_hetero.definition.errors import Loc, Problem
from airflow_hetero.definition.naming import MAX_BASE_JOB_NAME, check_base_job_name
from airflow_hetero.definition.rules import distribution, fallbacks, option_rules
from airflow_hetero.definition.rules.checks import (
    CHANNEL_NAME,
    ENV_KEY,
    HETERO_MINIMUM,
    MAX_ENV,
    MAX_HP_KEY,
    MAX_HP_VALUE,
    version_tuple,
)
from airflow_hetero.definition.rules.distribution import STRATEGIES, distribution_group
from airflow_hetero.definition.rules.option_rules import Options

# --- cross-field rules --------------------------------------------------------------------------


def cross_field(raw: Mapping[str, Any]) -> Iterator[Problem]:
    """Rules spanning several fields, checked on the raw definition (tolerant of bad fields)."""
    groups = _groups(raw)
    names = list(
        dict.fromkeys(g["instance_group_name"] for g in groups if isinstance(g.get("instance_group_name"), str))
    )
    yield from _cluster(raw, groups, names)
    yield from _channels(raw, names)
    yield from distribution.check(raw, groups, names)
    yield from fallback_problems(raw)
    yield from _framework_fields(raw)
    yield from _hetero_framework_version(raw)
    yield from _framework_image(raw)
    yield from _code_location(raw)
    yield from _base_job_name(raw)
    yield from _spot_options(raw)
    yield from _checkpoints(raw)
    yield from _vpc(raw)
    yield from _environment(raw.get("environment"))
    yield from _tags(raw.get("tags"))
    yield from _metric_definitions(raw.get("metric_definitions"))
    yield from _hyperparameters(raw)


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump() if callable(dump) else value


def _groups(raw: Mapping[str, Any]) -> list[dict[str, Any]]:
    groups = raw.get("instance_groups")
    if not isinstance(groups, list):
        return []
    return [g for g in (_plain(x) for x in groups) if isinstance(g, dict)]


def _cluster(raw: Mapping[str, Any], groups: list[dict[str, Any]], names: list[str]) -> Iterator[Problem]:
    has_groups = raw.get("instance_groups") is not None
    has_type = raw.get("instance_type") is not None
    has_count = raw.get("instance_count") is not None
    if has_groups and (has_type or has_count):
        field = "instance_type" if has_type else "instance_count"
        yield Problem(
            (field,),
            (
                "give either instance_groups (heterogeneous cluster) or instance_type + instance_count "
                "(homogeneous cluster), not both"
            ),
        )
    elif not has_groups and not (has_type and has_count):
        missing = "instance_count" if has_type else "instance_type" if has_count else "instance_groups"
        yield Problem(
            (missing,),
            (
                "the cluster is not defined: give instance_groups (heterogeneous cluster) "
                "or instance_type + instance_count (homogeneous cluster)"
            ),
        )
    seen: dict[str, int] = {}
    for index, name in enumerate(g.get("instance_group_name") for g in groups):
        if isinstance(name, str) and name in seen:
            yield Problem(
                ("instance_groups", index, "instance_group_name"),
                (
                    f"duplicate group name '{name}' (already used by instance_groups[{seen[name]}]); "
                    "group names must be unique"
                ),
            )
        elif isinstance(name, str):
            hint = confusable_hint(name, seen)
            if hint:
                yield Problem(
                    ("instance_groups", index, "instance_group_name"),
                    f"group name '{name}' looks the same as another group's{hint}; rename one of them",
                )
            seen[name] = index


def fallback_problems(raw: Mapping[str, Any], argument: Any = None) -> Iterator[Problem]:
    """Each group's ``fallback_instance_types`` and the operator's ``argument`` (which replaces the lists of
    the groups it names), then the distribution's rules on every candidate (tolerant of bad fields)."""
    groups = _groups(raw)
    stated: list[fallbacks.Group] = []
    given: dict[str, tuple[Loc, Any]] = {}  # group -> where its list is written, the list
    problems: list[Problem] = []
    for index, group in enumerate(groups):
        name, kind, count = (group.get(k) for k in ("instance_group_name", "instance_type", "instance_count"))
        entries = group.get("fallback_instance_types")
        loc: Loc = ("instance_groups", index, "fallback_instance_types")
        if isinstance(entries, list):
            problems += [p.within(loc) for p in fallbacks.list_problems(entries, kind)]
        if isinstance(name, str) and isinstance(kind, str) and isinstance(count, int):
            stated.append((name, kind, count))
            given[name] = (loc, entries or [])
    if argument is not None:
        problems += fallbacks.argument_problems(argument, stated if raw.get("instance_groups") is not None else [])
        if isinstance(argument, Mapping):
            given.update({name: ((fallbacks.ARGUMENT, name), entries) for name, entries in argument.items()})
    yield from problems
    if problems or len(stated) != len(groups):
        return
    lists = {name: fallbacks.candidates(given[name][1], count) for name, _, count in stated}
    names = [name for name, _, _ in stated]

    def rules(cluster: Sequence[fallbacks.Group]) -> Iterator[Problem]:
        replaced = [
            {**group, "instance_type": kind, "instance_count": count}
            for group, (_, kind, count) in zip(groups, cluster, strict=True)
        ]
        return distribution.check({**raw, "instance_groups": replaced}, replaced, names)

    yield from fallbacks.candidate_problems(stated, lists, rules, lambda name, index: (*given[name][0], index))


def _channels(raw: Mapping[str, Any], names: list[str]) -> Iterator[Problem]:
    inputs = raw.get("inputs")
    if not isinstance(inputs, Mapping):
        return
    hetero = raw.get("instance_groups") is not None
    known = ", ".join(names) or "(none)"
    for channel, value in inputs.items():
        if not CHANNEL_NAME.match(str(channel)) or len(str(channel)) > 64:
            yield Problem(
                ("inputs", str(channel)),
                (f"channel name '{channel}' is invalid; use 1 to 64 letters, digits, '.', '-' or '_'"),
            )
        spec = _plain(value)
        chosen = spec.get("instance_groups") if isinstance(spec, dict) else None
        if not isinstance(chosen, list):
            continue
        loc: Loc = ("inputs", str(channel), "instance_groups")
        if not hetero:
            yield Problem(
                loc, "channels can name instance groups only in a heterogeneous job (one with instance_groups)"
            )
            continue
        for name in chosen:
            if isinstance(name, str) and name not in names:
                hint = confusable_hint(name, names)
                yield Problem(loc, f"unknown instance group '{name}'; the job's groups are: {known}{hint}")
        dupes = sorted({n for n in chosen if isinstance(n, str) and chosen.count(n) > 1})
        if dupes:
            yield Problem(loc, f"group {', '.join(repr(d) for d in dupes)} listed more than once")


def _framework_fields(raw: Mapping[str, Any]) -> Iterator[Problem]:
    """What runs: a framework with its version, Python and script, or an image of its own."""
    framework = raw.get("framework")
    image_uri = raw.get("image_uri")
    if framework is None and image_uri is None:
        yield Problem(
            ("framework",), "give framework (pytorch or tensorflow) + framework_version + py_version, or image_uri"
        )
    if framework is not None and image_uri is None:
        for field in ("framework_version", "py_version"):
            if raw.get(field) is None:
                yield Problem((field,), f"required with framework '{framework}' unless image_uri is given")
    if framework is not None and raw.get("entry_point") is None:
        yield Problem(("entry_point",), f"required with framework '{framework}': the script the container runs")
    for field in ("framework_version", "py_version"):
        if raw.get(field) is not None and framework is None:
            yield Problem((field,), "only meaningful with framework (pytorch or tensorflow)")


def _hetero_framework_version(raw: Mapping[str, Any]) -> Iterator[Problem]:
    """A heterogeneous cluster needs a framework version that supports it (HETERO_MINIMUM)."""
    framework, version = raw.get("framework"), raw.get("framework_version")
    minimum = HETERO_MINIMUM.get(framework) if isinstance(framework, str) else None
    if raw.get("instance_groups") is None or not isinstance(version, str) or minimum is None:
        return
    parsed = version_tuple(version)
    if parsed is None:
        yield Problem(("framework_version",), f"'{version}' is not a version number such as '1.13.1'")
    elif parsed < minimum:
        floor = ".".join(map(str, minimum))
        yield Problem(
            ("framework_version",), (f"heterogeneous clusters need {framework} {floor} or newer (got {version})")
        )


def _framework_image(raw: Mapping[str, Any]) -> Iterator[Problem]:
    """Without image_uri, a Deep Learning Container must exist for the framework version and Python."""
    framework, version, py = raw.get("framework"), raw.get("framework_version"), raw.get("py_version")
    if raw.get("image_uri") is not None or framework not in HETERO_MINIMUM:
        return
    from airflow_hetero.definition.facts.images import ImageLookupError, check_py_version, resolve_version

    if isinstance(version, str):
        try:
            resolve_version(str(framework), version)
        except ImageLookupError as err:
            yield Problem(("framework_version",), str(err))
            return
        if isinstance(py, str):
            try:
                check_py_version(str(framework), version, py)
            except ImageLookupError as err:
                yield Problem(("py_version",), str(err))


def _code_location(raw: Mapping[str, Any]) -> Iterator[Problem]:
    """Where the script lives: inside source_dir, a .tar.gz in S3, or local code uploaded to output_path."""
    entry, source = raw.get("entry_point"), raw.get("source_dir")
    if isinstance(entry, str) and isinstance(source, str):
        parts = entry.replace("\\", "/").split("/")
        if entry.startswith("/") or ".." in parts or entry.lower().startswith("s3://"):
            yield Problem(
                ("entry_point",), (f"'{entry}' must be a path relative to source_dir (no leading '/', no '..')")
            )
    if isinstance(source, str) and source.lower().startswith("s3://") and not source.endswith(".tar.gz"):
        yield Problem(("source_dir",), f"'{source}' must point to a .tar.gz file when it is an S3 URI")
    output = raw.get("output_path")
    local_code = entry is not None and not (isinstance(source, str) and source.lower().startswith("s3://"))
    if local_code and isinstance(output, str) and output.lower().startswith("https://"):
        yield Problem(
            ("output_path",),
            (
                "local code is uploaded to the output bucket, so give output_path as s3://bucket/prefix "
                "(or put the code in S3 and set source_dir to its .tar.gz)"
            ),
        )


def _base_job_name(raw: Mapping[str, Any]) -> Iterator[Problem]:
    base = raw.get("base_job_name")
    if isinstance(base, str):
        problem = check_base_job_name(base)
        if problem:
            yield Problem(("base_job_name",), problem)


def _spot_options(raw: Mapping[str, Any]) -> Iterator[Problem]:
    """Spot's ``max_wait`` and checkpoint location, warm pools, training plans, instance preferences
    (:mod:`airflow_hetero.definition.rules.option_rules`, the rules request mode and the endpoint read too)."""
    options = Options(
        spot=raw.get("use_spot_instances"),
        max_wait=raw.get("max_wait"),
        max_run=raw.get("max_run"),
        checkpoint=raw.get("checkpoint_s3_uri"),
        keep_alive=raw.get("keep_alive_period_in_seconds"),
        training_plan=raw.get("training_plan"),
        preferences=raw.get("instance_preferences"),
        hetero=raw.get("instance_groups") is not None,
        homogeneous=raw.get("instance_type") is not None,
    )
    yield from option_rules.service_problems(options, option_rules.DEFINITION)
    yield from option_rules.package_problems(options, option_rules.DEFINITION)


def _checkpoints(raw: Mapping[str, Any]) -> Iterator[Problem]:
    """A local checkpoint path needs the S3 location it is synced to."""
    if raw.get("checkpoint_local_path") is not None and raw.get("checkpoint_s3_uri") is None:
        yield Problem(("checkpoint_local_path",), "needs checkpoint_s3_uri: the S3 location checkpoints are synced to")


def _vpc(raw: Mapping[str, Any]) -> Iterator[Problem]:
    """A VPC: subnets and security groups together, each list within the service's bounds."""
    subnets, sgs = raw.get("subnets"), raw.get("security_group_ids")
    if (subnets is None) != (sgs is None):
        missing = "security_group_ids" if sgs is None else "subnets"
        yield Problem((missing,), "a VPC needs both subnets and security_group_ids")
    for field, value in (("subnets", subnets), ("security_group_ids", sgs)):
        if isinstance(value, list) and not 1 <= len(value) <= (16 if field == "subnets" else 5):
            limit = 16 if field == "subnets" else 5
            yield Problem((field,), f"give 1 to {limit} entries (got {len(value)})")


def _environment(env: Any) -> Iterator[Problem]:
    if not isinstance(env, Mapping):
        return
    if len(env) > MAX_ENV:
        yield Problem(("environment",), f"at most {MAX_ENV} variables (got {len(env)})")
    for key, value in env.items():
        if not isinstance(key, str) or not ENV_KEY.match(key) or len(key) > 512:
            yield Problem(
                ("environment", str(key)), "variable names are letters, digits and '_', not starting with a digit"
            )
        if isinstance(value, str) and len(value) > 512:
            yield Problem(("environment", str(key)), f"value is {len(value)} characters; at most 512")


def _tags(tags: Any) -> Iterator[Problem]:
    if not isinstance(tags, list):
        return
    for index, tag in enumerate(tags):
        if not isinstance(tag, Mapping):
            continue
        if set(tag) != {"Key", "Value"}:
            yield Problem(("tags", index), "each tag is {Key: ..., Value: ...}")
            continue
        key, value = tag["Key"], tag["Value"]
        if isinstance(key, str) and not 1 <= len(key) <= 128:
            yield Problem(("tags", index, "Key"), "must be 1 to 128 characters")
        if isinstance(key, str) and key.lower().startswith("aws:"):
            yield Problem(("tags", index, "Key"), "the 'aws:' prefix is reserved by AWS")
        if isinstance(value, str) and len(value) > 256:
            yield Problem(("tags", index, "Value"), "must be at most 256 characters")


def _metric_definitions(defs: Any) -> Iterator[Problem]:
    if not isinstance(defs, list):
        return
    for index, item in enumerate(defs):
        if not isinstance(item, Mapping):
            continue
        if set(item) != {"Name", "Regex"}:
            yield Problem(("metric_definitions", index), "each metric definition is {Name: ..., Regex: ...}")
            continue
        name, regex = item["Name"], item["Regex"]
        if isinstance(name, str) and not 1 <= len(name) <= 255:
            yield Problem(("metric_definitions", index, "Name"), "must be 1 to 255 characters")
        if isinstance(regex, str):
            if not 1 <= len(regex) <= 500:
                yield Problem(("metric_definitions", index, "Regex"), "must be 1 to 500 characters")
            try:
                compiled = re.compile(regex)
            except re.error as err:
                yield Problem(("metric_definitions", index, "Regex"), f"does not compile: {err}")
            else:
                if compiled.groups < 1:
                    yield Problem(
                        ("metric_definitions", index, "Regex"),
                        ("needs a capture group around the number, e.g. 'loss=([0-9.]+)'"),
                    )


def _hyperparameters(raw: Mapping[str, Any]) -> Iterator[Problem]:
    """Reserved names and length limits, on the values as they will be sent."""
    from airflow_hetero.definition.facts.encoding import RESERVED, user_hyperparameters

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
            yield Problem(("hyperparameters", key), f"'{key}' is set by airflow-hetero from the definition; remove it")
        if len(key) > MAX_HP_KEY:
            yield Problem(("hyperparameters", key), f"name is {len(key)} characters; at most {MAX_HP_KEY}")
        if len(value) > MAX_HP_VALUE:
            how = "once JSON-encoded" if json_values else "as a string"
            yield Problem(("hyperparameters", key), f"value is {len(value)} characters {how}; at most {MAX_HP_VALUE}")


__all__ = ["MAX_BASE_JOB_NAME", "STRATEGIES", "cross_field", "distribution_group"]
