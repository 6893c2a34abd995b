"""What the operator submits, whichever form it was given in: a definition or a CreateTrainingJob request.

Both are a :class:`Submittable`: the base of the task's job names, a note for the task log, what
the Amazon provider's config asks for before the create, the request for a job name and region,
and the local training code to upload first. So the operator never asks which kind it holds. A
:class:`~airflow_hetero.definition.raw_request.training_request.TrainingRequest` is one as it is;
:class:`DefinitionJob` makes a :class:`~airflow_hetero.definition.job.HeteroTrainingJob` one (its
own ``base_job_name`` is the optional field the definition was given).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from airflow_hetero.definition.builder.source import SourceUpload
    from airflow_hetero.definition.job import HeteroTrainingJob
    from airflow_hetero.definition.raw_request.provider_config import ProviderSteps
    from airflow_hetero.definition.rules.fallbacks import Candidate

__all__ = ["DefinitionJob", "Submittable", "load_submittable"]


class Submittable(Protocol):
    """A job the operator can submit: a checked definition or request, not yet named."""

    @property
    def base_job_name(self) -> str:
        """The base of the job names derived per task instance."""

    @property
    def name_note(self) -> str | None:
        """What the task log says when a name the job came with is not used, if anything."""

    @property
    def steps(self) -> ProviderSteps:
        """The provider's ``S3Operations`` and a role name as ``RoleArn``, run before the create (or none)."""

    @property
    def fallbacks(self) -> dict[str, list[Candidate]]:
        """Each instance group's fallbacks ``[(instance_type, instance_count)]``, in order of preference
        (``[]``: none); the operator's ``fallback_instance_types`` merged in (docs/capacity.md)."""

    def build(self, *, job_name: str, region: str, role_arn: str | None = None) -> dict[str, Any]:
        """The CreateTrainingJob request to send as ``job_name`` in ``region``; ``role_arn``: what the
        role name of :attr:`steps` expanded to."""

    def source_upload(self, job_name: str, base_dir: Path) -> SourceUpload | None:
        """The local code to upload before the create (paths against ``base_dir``), or None."""


@dataclass(frozen=True)
class DefinitionJob:
    """A :class:`~airflow_hetero.definition.job.HeteroTrainingJob` as a :class:`Submittable`."""

    job: HeteroTrainingJob
    #: The operator's ``fallback_instance_types``, checked: it replaces the lists of the groups it names.
    argument: Mapping[str, Any] | None = field(default=None)

    @property
    def base_job_name(self) -> str:
        """The definition's ``base_job_name``, or the SDK's default (the image's repository name)."""
        from airflow_hetero.definition.builder.definition_request import base_job_name

        return base_job_name(self.job)

    @property
    def name_note(self) -> None:
        """None: a definition carries no job name of its own."""
        return None

    @property
    def steps(self) -> ProviderSteps:
        """A role name as ``role`` to expand (as the SDK's ``expand_role``), else nothing (the code upload
        is :meth:`source_upload`)."""
        from airflow_hetero.definition.facts.roles import is_role_name
        from airflow_hetero.definition.raw_request.provider_config import ProviderSteps

        if not is_role_name(self.job.role):
            return ProviderSteps()
        return ProviderSteps(role_name=self.job.role, role_field="role")

    @property
    def fallbacks(self) -> dict[str, list[Candidate]]:
        """Each group's ``fallback_instance_types``, or the argument's list for the groups it names."""
        from airflow_hetero.definition.rules.fallbacks import resolved

        groups = [(g.instance_group_name, g.instance_type, g.instance_count) for g in self.job.instance_groups or []]
        field = {g.instance_group_name: g.fallback_instance_types for g in self.job.instance_groups or []}
        return resolved(groups, field, self.argument)

    def build(self, *, job_name: str, region: str, role_arn: str | None = None) -> dict[str, Any]:
        """The request the SageMaker Python SDK v2 sends for the definition; ``role_arn``: what a role
        name as ``role`` expanded to (required then)."""
        from airflow_hetero.definition.builder.definition_request import build_training_request

        return build_training_request(self.job, job_name=job_name, region=region, role_arn=role_arn)

    def source_upload(self, job_name: str, base_dir: Path) -> SourceUpload | None:
        """A local ``source_dir`` (or entry point) packaged for ``job_name``; None when the code is in S3."""
        from airflow_hetero.definition.builder.source import source_upload

        return source_upload(self.job, job_name, base=base_dir)


def load_submittable(source: Mapping[str, Any], *, request: bool, fallbacks: Any = None) -> Submittable:
    """A request (``request``) or a definition from ``source``, checked; JobDefinitionError lists every problem.

    ``fallbacks``: the operator's ``fallback_instance_types``, checked against the job's groups and the
    job's rules on every candidate (in definition mode it replaces the lists of the groups it names).
    """
    if request:
        from airflow_hetero.definition.raw_request.training_request import load_request

        return load_request(source, fallbacks=fallbacks)
    from airflow_hetero.definition.errors import JobDefinitionError, unique
    from airflow_hetero.definition.job import load_job

    if fallbacks is None:
        return DefinitionJob(load_job(source))
    from airflow_hetero.definition.rules.cross_field import fallback_problems
    from airflow_hetero.definition.rules.fallbacks import ARGUMENT

    try:
        job = load_job(source)
    except JobDefinitionError as err:  # the argument's own problems too, all at once
        extra = [p for p in fallback_problems(dict(source), fallbacks) if p.path[:1] == (ARGUMENT,)]
        raise JobDefinitionError(unique([*err.problems, *extra]), err.title) from None
    problems = list(fallback_problems(job.model_dump(), fallbacks))
    if problems:
        raise JobDefinitionError(problems, "invalid HeteroTrainingJob definition")
    return DefinitionJob(job, fallbacks)
