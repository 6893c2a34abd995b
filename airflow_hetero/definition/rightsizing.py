"""The right-sizing policy of a training task: which groups may change their instance count, within which
bounds, toward which objective, and whether the next run uses the change (docs/rightsizing.md).

:class:`RightSizing` is the operator's ``rightsizing=`` (the model or a dict of the same fields). It is
checked on its own (:meth:`RightSizing.of`) and against the job's groups (:func:`policy_problems`): each
problem names its field, e.g. ``rightsizing.groups.data_group.max_count``. :func:`definition_fingerprint`
tells a changed definition from a changed count, and :class:`CountedJob` is a job whose managed groups run
with the counts a decision chose. No Airflow, no AWS: the decisions themselves are
:mod:`airflow_hetero.job.rightsizing`'s.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

if TYPE_CHECKING:
    from airflow_hetero.definition.builder.source import SourceUpload
    from airflow_hetero.definition.raw_request.provider_config import ProviderSteps
    from airflow_hetero.definition.rules.fallbacks import Candidate
    from airflow_hetero.definition.submittable import Submittable

__all__ = [
    "CountedJob",
    "GroupBounds",
    "GroupFacts",
    "RightSizing",
    "RightSizingError",
    "definition_fingerprint",
    "groups_of_source",
    "policy_problems",
]

#: The field name problems start with.
FIELD = "rightsizing"


class RightSizingError(ValueError):
    """A right-sizing policy that cannot hold: the message names the field (``rightsizing.<path>: ...``)."""


def _no_bool(value: Any) -> Any:
    """A count is a whole number (a rendered template's ``"8"`` is one); ``True`` is not."""
    if isinstance(value, bool):
        raise ValueError(f"a number, not {value}")
    return value


class GroupBounds(BaseModel):
    """What a right-sized group may become: ``min_count`` to ``max_count`` instances (both included).

    ``types``: the instance types the group may run on (its own and its fallbacks'): a group whose count is at a
    bound may move between them, one type at a time (docs/rightsizing.md, "Moving between types")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_count: int = Field(default=1, ge=1)
    max_count: int = Field(ge=1)
    types: list[str] | None = None

    @field_validator("min_count", "max_count", mode="before")
    @classmethod
    def _not_bool(cls, value: Any) -> Any:
        return _no_bool(value)

    @model_validator(mode="after")
    def _ordered(self) -> GroupBounds:
        if self.min_count > self.max_count:
            raise ValueError(f"min_count {self.min_count} is above max_count {self.max_count}")
        if self.types is not None and not self.types:
            raise ValueError("types, when given, lists at least one instance type")
        return self


class RightSizing(BaseModel):
    """The operator's ``rightsizing=``: see docs/rightsizing.md.

    * ``groups``: group name -> :class:`GroupBounds`; a group left out is never changed (pinned).
    * ``objective``: ``cost`` (a change must not make a run cost more: a grown group must pay for itself by a
      shorter run) or ``time`` (a bottleneck grows whatever it costs, within ``max_cost``).
    * ``tolerance``: the share by which two runs may differ in length or cost and still count as equal (noise).
    * ``mode``: ``recommend`` (nothing changes: the decision is logged, in XCom and in the Instance groups
      view) or ``apply`` (the next run uses the decided counts).
    * ``agree_runs``: a group changes only when this many latest runs at its current count agree.
    * ``history``: the most records of earlier runs kept as evidence.
    * ``summary_task_id``: the ``HeteroLogSummaryOperator`` task that records each run (None: the DAG's
      summary task whose ``training_task_id`` is this task).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    groups: dict[str, GroupBounds] = Field(min_length=1)
    objective: Literal["cost", "time"] = "cost"
    tolerance: float = Field(default=0.05, ge=0, lt=1)
    mode: Literal["recommend", "apply"] = "recommend"
    agree_runs: int = Field(default=2, ge=1, le=10)
    history: int = Field(default=6, ge=1, le=50)
    summary_task_id: str | None = None

    @field_validator("agree_runs", "history", "tolerance", mode="before")
    @classmethod
    def _not_bool(cls, value: Any) -> Any:
        return _no_bool(value)

    @model_validator(mode="after")
    def _history_holds_agreement(self) -> RightSizing:
        if self.history < self.agree_runs:
            raise ValueError(f"history {self.history} keeps fewer runs than agree_runs {self.agree_runs} needs")
        return self

    @classmethod
    def of(cls, value: RightSizing | Mapping[str, Any]) -> RightSizing:
        """The policy from itself or a dict; :class:`RightSizingError` names the field of each problem."""
        if isinstance(value, RightSizing):
            return value
        if not isinstance(value, Mapping):
            raise RightSizingError(f"{FIELD}: a RightSizing or a dict, got {type(value).__name__}")
        try:
            return cls.model_validate(dict(value))
        except ValidationError as err:
            raise RightSizingError(_explain(err)) from None

    def as_dict(self) -> dict[str, Any]:
        """The policy as plain JSON (how the operator keeps it: a template field renders at any depth)."""
        return self.model_dump(mode="json", exclude_none=True)


def _explain(err: ValidationError) -> str:
    parts = []
    for item in err.errors():
        loc = ".".join(str(p) for p in (FIELD, *item["loc"]))
        message = str(item["msg"]).removeprefix("Value error, ")
        parts.append(f"{loc}: {message}")
    return "; ".join(parts)


@dataclass(frozen=True)
class GroupFacts:
    """One group of the job as written: its type, its count and the types its fallbacks may run on."""

    instance_type: str
    instance_count: int
    fallback_types: tuple[str, ...] = ()


def groups_of_source(
    source: Mapping[str, Any], *, request: bool, fallbacks: Mapping[str, Any] | None = None
) -> dict[str, GroupFacts]:
    """The groups of a definition (``instance_groups``) or a request (``ResourceConfig.InstanceGroups``),
    with their fallback types (the group's own list, the operator's ``fallback_instance_types`` winning);
    ``{}`` for a job without instance groups. Reads plain data, checks nothing else."""
    if request:
        config = source.get("ResourceConfig") or {}
        raw = config.get("InstanceGroups") if isinstance(config, Mapping) else None
        keys: tuple[str, str, str, str | None] = ("InstanceGroupName", "InstanceType", "InstanceCount", None)
    else:
        raw = source.get("instance_groups")
        keys = ("instance_group_name", "instance_type", "instance_count", "fallback_instance_types")
    out: dict[str, GroupFacts] = {}
    for group in raw if isinstance(raw, list) else []:
        if not isinstance(group, Mapping):
            continue
        name = str(group.get(keys[0]))
        listed = group.get(keys[3]) if keys[3] else None
        if fallbacks and name in fallbacks:
            listed = fallbacks[name]
        types = tuple(e if isinstance(e, str) else str(e.get("instance_type")) for e in listed or [])
        count = group.get(keys[2])
        out[name] = GroupFacts(str(group.get(keys[1])), count if isinstance(count, int) else 0, types)
    return out


def policy_problems(policy: RightSizing, groups: Mapping[str, GroupFacts]) -> list[str]:
    """What does not hold between the policy and the job's groups, each naming its field: a group the job
    lacks, bounds that exclude the group's count as written, a type neither the group's own nor a fallback's."""
    if not groups:
        return [f"{FIELD}: right-sizing changes instance groups' counts; this job has no instance_groups"]
    problems = []
    for name, bounds in policy.groups.items():
        where = f"{FIELD}.groups.{name}"
        facts = groups.get(name)
        if facts is None:
            problems.append(f"{where}: the job has no such instance group (it has {', '.join(sorted(groups))})")
            continue
        if not bounds.min_count <= facts.instance_count <= bounds.max_count:
            problems.append(
                f"{where}: the job runs {facts.instance_count} instances, outside min_count {bounds.min_count} "
                f"to max_count {bounds.max_count}"
            )
        allowed = {facts.instance_type, *facts.fallback_types}
        for index, kind in enumerate(bounds.types or []):
            if kind not in allowed:
                problems.append(
                    f"{where}.types.{index}: {kind} is neither the group's type nor one of its fallbacks "
                    f"({', '.join(sorted(allowed))})"
                )
    return problems


def check_policy(policy: RightSizing, groups: Mapping[str, GroupFacts]) -> None:
    """:func:`policy_problems` as one :class:`RightSizingError`."""
    problems = policy_problems(policy, groups)
    if problems:
        raise RightSizingError("; ".join(problems))


def definition_fingerprint(source: Mapping[str, Any] | str, managed: Sequence[str], *, request: bool) -> str:
    """A short hash of the job as written, Jinja unrendered, without the counts of the ``managed`` groups:
    a run whose fingerprint differs came from a changed definition, whatever its data (a templated input
    path) or the counts right-sizing chose. ``source``: the definition or request, or the path of its file
    (the file's text is read as it is)."""
    if isinstance(source, str):
        try:
            text = Path(source).read_text()
        except OSError:
            text = source  # a path the worker resolves elsewhere: its name is what is known here
        return hashlib.sha256(text.encode()).hexdigest()[:16]
    data = json.loads(json.dumps(source, default=str))
    for group in groups_list(data, request=request):
        name = group.get("InstanceGroupName" if request else "instance_group_name")
        if name in managed:
            group.pop("InstanceCount" if request else "instance_count", None)
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def groups_list(data: Any, *, request: bool) -> list[dict[str, Any]]:
    """The mutable list of group dicts of a definition or request (``[]`` when it has none)."""
    if not isinstance(data, dict):
        return []
    holder = data.get("ResourceConfig") if request else data
    raw = holder.get("InstanceGroups" if request else "instance_groups") if isinstance(holder, dict) else None
    return [g for g in raw if isinstance(g, dict)] if isinstance(raw, list) else []


@dataclass(frozen=True)
class CountedJob:
    """A :class:`~airflow_hetero.definition.submittable.Submittable` whose requests run the ``counts``
    (group name -> instance count) and ``types`` (group name -> instance type) a right-sizing decision chose;
    everything else is ``job``'s."""

    job: Submittable
    counts: Mapping[str, int]
    types: Mapping[str, str] = field(default_factory=dict)

    @property
    def base_job_name(self) -> str:
        return self.job.base_job_name

    @property
    def name_note(self) -> str | None:
        return self.job.name_note

    @property
    def steps(self) -> ProviderSteps:
        return self.job.steps

    @property
    def fallbacks(self) -> dict[str, list[Candidate]]:
        return self.job.fallbacks

    def build(self, *, job_name: str, region: str, role_arn: str | None = None) -> dict[str, Any]:
        """The job's request with the decided counts and types in ``ResourceConfig.InstanceGroups``."""
        request = self.job.build(job_name=job_name, region=region, role_arn=role_arn)
        for group in groups_list(request, request=True):
            name = str(group.get("InstanceGroupName"))
            count, kind = self.counts.get(name), self.types.get(name)
            if count is not None:
                group["InstanceCount"] = count
            if kind is not None:
                group["InstanceType"] = kind
        return request

    def source_upload(self, job_name: str, base_dir: Path) -> SourceUpload | None:
        return self.job.source_upload(job_name, base_dir)
