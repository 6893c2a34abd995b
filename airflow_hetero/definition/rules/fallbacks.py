"""Fallback instance types: what may replace a group's instance type (and count) when capacity is short.

One vocabulary for both forms of a job: a definition's ``instance_groups[i].fallback_instance_types``
and the operator's ``fallback_instance_types={group: [...]}`` (request mode's only way: a
CreateTrainingJob request carries no such member, the service would refuse it). Each list is in order
of preference, at most :data:`MAX_FALLBACKS` entries; an entry is an instance type (the group's count
stays) or ``{instance_type, instance_count}`` (one 8-GPU instance replaced by two 4-GPU ones). In
definition mode the argument replaces the field's list of each group it names (``[]`` turns a
group's fallbacks off).

The rules of an entry (botocore's enum, count of at least 1, not the group's own type, not repeated,
the same accelerator as the group's type) are here; the rules of the job that read instance types (the
distribution's in definition mode, the service's in request mode) are applied to each candidate by
:func:`candidate_problems` with the caller's rule function. Pure: no pydantic, neither room's models.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from airflow_hetero.definition.display import confusable_hint
from airflow_hetero.definition.errors import Loc, Problem
from airflow_hetero.definition.facts import instance_types

__all__ = [
    "ARGUMENT",
    "MAX_FALLBACKS",
    "Candidate",
    "Group",
    "argument_problems",
    "candidate_problems",
    "candidates",
    "check_argument",
    "list_problems",
    "request_groups",
    "resolved",
    "with_cluster",
]

#: Fallbacks per group, at most: each is a whole job submitted and failed before the next.
MAX_FALLBACKS = 5
#: The operator's argument (and the CLI's ``--fallback``): its problems are named under it.
ARGUMENT = "fallback_instance_types"
_KEYS = ("instance_type", "instance_count")
#: One choice of a group: ``(instance_type, instance_count)``.
Candidate = tuple[str, int]
#: A group as the job states it: ``(name, instance_type, instance_count)``.
Group = tuple[str, str, int]
_KINDS = {"gpu": "GPU", "cpu": "CPU", "trainium": "Trainium", "inferentia": "Inferentia"}
_SHAPE = "an instance type or {instance_type, instance_count}"


def list_problems(entries: Any, own_type: Any = None) -> Iterator[Problem]:
    """Problems of one group's list, at paths relative to the list (``(0, "instance_type")``).

    ``own_type``: the group's instance type (None: not known yet, only the entries are checked).
    """
    if not isinstance(entries, list):
        yield Problem((), f"must be a list, in order of preference, of {_SHAPE} (got {type(entries).__name__})")
        return
    if len(entries) > MAX_FALLBACKS:
        yield Problem((), f"at most {MAX_FALLBACKS} fallbacks per group (got {len(entries)})")
    seen: dict[str, int] = {}
    for index, entry in enumerate(entries):
        yield from _entry_problems(index, entry)
        kind, where = _entry_type(entry), _type_loc(index, entry)
        if not isinstance(kind, str):
            continue
        if kind == own_type:
            yield Problem(where, f"'{kind}' is the group's own instance type; a fallback names another type")
        elif kind in seen:
            yield Problem(where, f"'{kind}' is listed twice (already [{seen[kind]}])")
        elif isinstance(own_type, str) and _known(kind) and _known(own_type):
            mine, theirs = _KINDS[instance_types.accelerator(own_type)], _KINDS[instance_types.accelerator(kind)]
            if mine != theirs:
                yield Problem(
                    where,
                    f"'{kind}' is a {theirs} type but the group's {own_type} is {mine}: the job's one image and "
                    f"its framework checks are chosen for {mine} instances; fall back to {mine} types only",
                )
        seen.setdefault(kind, index)


def _entry_problems(index: int, entry: Any) -> Iterator[Problem]:
    if isinstance(entry, Mapping):
        for key in entry:
            if key not in _KEYS:
                yield Problem((index, str(key)), f"unknown key '{key}'; allowed: {', '.join(_KEYS)}")
        if "instance_type" not in entry:
            yield Problem((index, "instance_type"), "field required")
        count = entry.get("instance_count")
        if isinstance(count, bool) or (count is not None and not isinstance(count, int)):
            yield Problem((index, "instance_count"), f"must be a whole number (got {count!r})")
        elif isinstance(count, int) and count < 1:
            yield Problem((index, "instance_count"), f"must be at least 1 (got {count})")
    elif not isinstance(entry, str):
        yield Problem((index,), f"must be {_SHAPE} (got {type(entry).__name__})")
        return
    kind = _entry_type(entry)
    if isinstance(kind, str):
        problem = instance_types.type_problem(kind)
        if problem:
            yield Problem(_type_loc(index, entry), problem)
    elif kind is not None:
        yield Problem(_type_loc(index, entry), f"must be a string (got {type(kind).__name__})")


def _entry_type(entry: Any) -> Any:
    return entry if isinstance(entry, str) else entry.get("instance_type") if isinstance(entry, Mapping) else None


def _type_loc(index: int, entry: Any) -> Loc:
    return (index, "instance_type") if isinstance(entry, Mapping) else (index,)


def _known(kind: str) -> bool:
    return instance_types.type_problem(kind) is None


def candidates(entries: Iterable[Any], own_count: int) -> list[Candidate]:
    """A checked list as ``[(instance_type, instance_count)]``: a plain type keeps ``own_count``."""
    out: list[Candidate] = []
    for entry in entries:
        if isinstance(entry, str):
            out.append((entry, own_count))
        else:
            count = entry.get("instance_count")
            out.append((str(entry["instance_type"]), own_count if count is None else int(count)))
    return out


def resolved(
    groups: Sequence[Group], field: Mapping[str, Any], argument: Mapping[str, Any] | None
) -> dict[str, list[Candidate]]:
    """Each group's checked candidates in order of preference: the argument's list for the groups it
    names, else the definition's (``field``: group -> its ``fallback_instance_types``)."""
    chosen = {**field, **(argument or {})}
    return {name: candidates(chosen.get(name) or [], count) for name, _, count in groups}


def check_argument(argument: Any) -> None:
    """Raise :class:`~airflow_hetero.definition.errors.JobDefinitionError` for an argument bad on its own
    (its job not known yet: a file or a template, at DAG-parse time)."""
    from airflow_hetero.definition.errors import JobDefinitionError

    problems = argument_problems(argument, None)
    if problems:
        raise JobDefinitionError(problems, f"invalid {ARGUMENT}")


def argument_problems(argument: Any, groups: Sequence[Group] | None) -> list[Problem]:
    """The operator's ``fallback_instance_types``, at ``fallback_instance_types.<group>[i]`` paths.

    ``groups``: the job's (None: not known yet, at DAG-parse time with a file; only the entries are
    checked). A homogeneous job (no groups) takes none.
    """
    root: Loc = (ARGUMENT,)
    if argument is None:
        return []
    if not isinstance(argument, Mapping):
        example = "{train_group: [ml.p5.48xlarge]}"
        return [Problem(root, f"must be a mapping of instance group name -> list of fallbacks, e.g. {example}")]
    if groups is not None and not groups and argument:
        return [Problem(root, "the job has no instance groups (a homogeneous cluster): fallbacks are per group")]
    names = [name for name, _, _ in groups or ()]
    own = {name: kind for name, kind, _ in groups or ()}
    out: list[Problem] = []
    for name, entries in argument.items():
        loc: Loc = (ARGUMENT, str(name))
        if groups is not None and name not in own:
            hint = confusable_hint(str(name), names)
            out.append(Problem(loc, f"unknown instance group '{name}'; the job's groups are: {', '.join(names)}{hint}"))
            continue
        out += [p.within(loc) for p in list_problems(entries, own.get(name))]
    return out


def candidate_problems(
    groups: Sequence[Group],
    lists: Mapping[str, Sequence[Candidate]],
    rules: Callable[[Sequence[Group]], Iterable[Problem]],
    where: Callable[[str, int], Loc],
) -> Iterator[Problem]:
    """The job's type-reading ``rules`` applied to each candidate: the cluster with one group on it.

    A problem the job's own cluster does not have is reported at ``where(group, index)``. One group
    at a time suffices: every such rule reads one group's type (the distribution group's) or asks
    whether any group has some type, so a cluster of several fallbacks breaks a rule only when one
    of them alone does.
    """
    base = {str(p) for p in rules(groups)}
    for position, (name, _, _) in enumerate(groups):
        for index, (kind, count) in enumerate(lists.get(name, ())):
            cluster = [*groups[:position], (name, kind, count), *groups[position + 1 :]]
            for problem in rules(cluster):
                if str(problem) not in base:
                    yield Problem(where(name, index), f"the job breaks a rule on this fallback: {problem}")


def request_groups(request: Mapping[str, Any]) -> list[Group]:
    """``ResourceConfig.InstanceGroups`` of a CreateTrainingJob request as :data:`Group` (well-formed ones)."""
    resource = request.get("ResourceConfig")
    groups = resource.get("InstanceGroups") if isinstance(resource, Mapping) else None
    out: list[Group] = []
    for group in groups if isinstance(groups, list) else []:
        name, kind, count = (group.get(k) for k in ("InstanceGroupName", "InstanceType", "InstanceCount"))
        if isinstance(name, str) and isinstance(kind, str) and isinstance(count, int):
            out.append((name, kind, count))
    return out


def with_cluster(request: Mapping[str, Any], cluster: Mapping[str, Candidate]) -> dict[str, Any]:
    """A copy of a CreateTrainingJob ``request`` whose groups named in ``cluster`` have its type and count.

    Everything else stays (image, channels, hyperparameters, names). KeyError for a group the request
    does not have.
    """
    out = copy.deepcopy(dict(request))
    groups = {g["InstanceGroupName"]: g for g in out.get("ResourceConfig", {}).get("InstanceGroups") or []}
    for name, (kind, count) in cluster.items():
        if name not in groups:
            raise KeyError(f"the request has no instance group '{name}' (its groups: {', '.join(groups)})")
        groups[name]["InstanceType"], groups[name]["InstanceCount"] = kind, count
    return out
