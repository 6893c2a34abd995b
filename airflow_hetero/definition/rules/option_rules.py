"""Managed spot, warm pools, training plans and instance preferences: their rules, stated once (pure).

A definition (``use_spot_instances``, ``max_wait``, ...), a raw CreateTrainingJob request
(``EnableManagedSpotTraining``, ``StoppingCondition.MaxWaitTimeInSeconds``, ...) and the offline
endpoint check the same rules from here; each form passes its values and the paths it names them by
(:data:`DEFINITION`, :data:`REQUEST`). Messages quote the service
(:mod:`airflow_hetero.sagemaker_facts`). :func:`service_problems` are the service's rules;
:func:`package_problems` are this package's own (a checkpoint location for spot: SageMaker recommends one,
it does not require one), which the endpoint does not apply. Reads values defensively: a value of the
wrong type is its shape check's problem, not a crash here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from airflow_hetero.definition.errors import Loc, Problem
from airflow_hetero.sagemaker_facts import (
    DEFAULT_MAX_RUNTIME_SECONDS,
    INSTANCE_PREFERENCES_EXCLUSIVE,
    MAX_WAIT_AT_LEAST_RUNTIME,
    MAX_WAIT_ONLY_WITH_SPOT,
    SPOT_CHECKPOINT_ADVICE,
    SPOT_NEEDS_MAX_WAIT,
    TRAINING_PLAN_DOC,
    TRAINING_PLAN_NOT_HETERO,
    WARM_POOL_NOT_HETERO,
    WARM_POOL_NOT_SPOT,
)

__all__ = ["DEFINITION", "REQUEST", "Names", "Options", "package_problems", "service_problems"]


@dataclass(frozen=True)
class Names:
    """Where a form keeps each value. ``lead``: the service's style, as the endpoint answers too: messages start
    with the member's own name and name members so (``MaxWaitTimeInSeconds``), the path stays the problem's."""

    spot: Loc
    max_wait: Loc
    max_run: Loc
    checkpoint: Loc
    keep_alive: Loc
    training_plan: Loc
    preferences: Loc
    groups: Loc
    instance_type: Loc
    lead: bool = False

    def shown(self, loc: Loc) -> str:
        """A path as messages show it: ``max_wait``, or the member's own name ``MaxWaitTimeInSeconds``."""
        return str(loc[-1]) if self.lead else ".".join(str(part) for part in loc)


DEFINITION = Names(
    spot=("use_spot_instances",),
    max_wait=("max_wait",),
    max_run=("max_run",),
    checkpoint=("checkpoint_s3_uri",),
    keep_alive=("keep_alive_period_in_seconds",),
    training_plan=("training_plan",),
    preferences=("instance_preferences",),
    groups=("instance_groups",),
    instance_type=("instance_type",),
)
REQUEST = Names(
    spot=("EnableManagedSpotTraining",),
    max_wait=("StoppingCondition", "MaxWaitTimeInSeconds"),
    max_run=("StoppingCondition", "MaxRuntimeInSeconds"),
    checkpoint=("CheckpointConfig", "S3Uri"),
    keep_alive=("ResourceConfig", "KeepAlivePeriodInSeconds"),
    training_plan=("ResourceConfig", "TrainingPlanArn"),
    preferences=("ResourceConfig", "InstancePreferences"),
    groups=("ResourceConfig", "InstanceGroups"),
    instance_type=("ResourceConfig", "InstanceType"),
    lead=True,
)


@dataclass(frozen=True)
class Options:
    """The values the rules read, as a form gives them (``None``: not given)."""

    spot: Any = None
    max_wait: Any = None
    max_run: Any = None
    checkpoint: Any = None
    keep_alive: Any = None
    training_plan: Any = None
    preferences: Any = None
    hetero: bool = False
    homogeneous: bool = False

    @classmethod
    def of_request(cls, request: dict[str, Any]) -> Options:
        """The values of a CreateTrainingJob request (a DescribeTrainingJob answer reads the same)."""
        stopping = request.get("StoppingCondition")
        stopping = stopping if isinstance(stopping, dict) else {}
        resource = request.get("ResourceConfig")
        resource = resource if isinstance(resource, dict) else {}
        checkpoint = request.get("CheckpointConfig")
        return cls(
            spot=request.get("EnableManagedSpotTraining"),
            max_wait=stopping.get("MaxWaitTimeInSeconds"),
            max_run=stopping.get("MaxRuntimeInSeconds"),
            checkpoint=checkpoint.get("S3Uri") if isinstance(checkpoint, dict) else None,
            keep_alive=resource.get("KeepAlivePeriodInSeconds"),
            training_plan=resource.get("TrainingPlanArn"),
            preferences=resource.get("InstancePreferences"),
            hetero=bool(resource.get("InstanceGroups")),
            homogeneous=resource.get("InstanceType") is not None,
        )


def _number(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _say(names: Names, loc: Loc, text: str) -> Problem:
    return Problem(loc, f"{names.shown(loc)} {text}" if names.lead else text)


def service_problems(options: Options, names: Names) -> Iterator[Problem]:
    """The service's rules: spot's MaxWait, and what heterogeneous (or spot) jobs cannot be combined with."""
    yield from _spot_wait(options, names)
    yield from _refused(options, names)


def _spot_wait(o: Options, names: Names) -> Iterator[Problem]:
    spot_on, spot = o.spot is True, names.shown(names.spot)
    if spot_on and o.max_wait is None:
        yield _say(names, names.max_wait, f"is required with {spot}: true (SageMaker: '{SPOT_NEEDS_MAX_WAIT}')")
    if o.max_wait is not None and not spot_on:
        yield _say(names, names.max_wait, f"is only allowed with {spot}: true (SageMaker: '{MAX_WAIT_ONLY_WITH_SPOT}')")
    wait = _number(o.max_wait)
    run = DEFAULT_MAX_RUNTIME_SECONDS if o.max_run is None else _number(o.max_run)
    if spot_on and wait is not None and run is not None and wait < run:
        where = names.shown(names.max_run)
        yield _say(
            names,
            names.max_wait,
            f"must be at least {where} ({run}), since it includes the run (got {wait}); "
            f"SageMaker: '{MAX_WAIT_AT_LEAST_RUNTIME}'",
        )


def _refused(o: Options, names: Names) -> Iterator[Problem]:
    groups, spot = names.shown(names.groups), names.shown(names.spot)
    if o.keep_alive is not None and o.hetero:
        yield _say(
            names,
            names.keep_alive,
            f"cannot be used with {groups} (SageMaker guide, warm pools: '{WARM_POOL_NOT_HETERO}')",
        )
    elif o.keep_alive is not None and o.spot is True:
        yield _say(
            names,
            names.keep_alive,
            f"cannot be used with {spot}: true (SageMaker guide, warm pools: {WARM_POOL_NOT_SPOT})",
        )
    if o.training_plan is not None and o.hetero:
        yield _say(
            names,
            names.training_plan,
            f"cannot be used with {groups}: {TRAINING_PLAN_NOT_HETERO} (botocore: '{TRAINING_PLAN_DOC}')",
        )
    if o.preferences is not None and (o.hetero or o.homogeneous or o.spot is True):
        other = groups if o.hetero else names.shown(names.instance_type) if o.homogeneous else f"{spot}: true"
        yield _say(
            names, names.preferences, f"cannot be used with {other} (SageMaker: '{INSTANCE_PREFERENCES_EXCLUSIVE}')"
        )


def package_problems(options: Options, names: Names) -> Iterator[Problem]:
    """This package's own rule: spot needs a checkpoint location (the service only recommends one)."""
    if options.spot is True and options.checkpoint is None:
        yield _say(
            names,
            names.checkpoint,
            f"is required with {names.shown(names.spot)}: true: an interrupted spot job restarts every host and "
            "resumes only from what it wrote to its checkpoint folder (airflow-hetero's rule; "
            f"SageMaker: '{SPOT_CHECKPOINT_ADVICE}')",
        )
