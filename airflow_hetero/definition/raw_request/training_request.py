"""Request mode: a CreateTrainingJob request given as is, checked as the service and the SDK check it.

What it takes: the Amazon provider's ``SageMakerTrainingOperator`` ``config``, the JSON of
``aws sagemaker create-training-job --cli-input-json`` (the operation's input, nothing else) and
the request the SageMaker Python SDK v3 sends; the provider's ``S3Operations`` and a role name as
``RoleArn`` are taken as the provider takes them (:mod:`~airflow_hetero.definition.raw_request.provider_config`).
It is checked with botocore's shape rules (:mod:`~airflow_hetero.definition.raw_request.service_shapes`) and
the service's heterogeneous rules
(:mod:`~airflow_hetero.definition.raw_request.service_rules`); every problem is reported at once, by its
request path, as a :class:`~airflow_hetero.definition.errors.JobDefinitionError`.

The job name is the task's: a ``TrainingJobName`` in the request is replaced by the name derived
per task instance (it becomes the base of that name), so a retry finds its job.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from airflow_hetero.definition import naming
from airflow_hetero.definition.errors import JobDefinitionError, Problem, unique
from airflow_hetero.definition.raw_request import service_rules
from airflow_hetero.definition.raw_request.provider_config import ProviderSteps, take_provider_steps
from airflow_hetero.definition.rules import fallbacks
from airflow_hetero.definition.rules.fallbacks import Candidate

__all__ = ["TITLE", "TrainingRequest", "check_request", "fallback_problems", "is_request_document", "load_request"]

TITLE = "invalid CreateTrainingJob request"
OPERATION = "CreateTrainingJob"
#: A valid name the shape check sees in place of the task's own (which is only known when it runs).
_STAND_IN = "request-mode"


class TrainingRequest:
    """A checked CreateTrainingJob request without its name; :meth:`build` names it.

    A :class:`~airflow_hetero.definition.submittable.Submittable`, as a definition is.
    """

    def __init__(
        self,
        request: dict[str, Any],
        given_name: str | None = None,
        steps: ProviderSteps | None = None,
        fallbacks: Mapping[str, Any] | None = None,
    ) -> None:
        self.request = request
        #: The TrainingJobName the request came with (replaced by the task's name), if any.
        self.given_name = given_name
        #: What the Amazon provider's config asks for before the job is created (S3Operations, a role name).
        self.steps = steps if steps is not None else ProviderSteps()
        #: Each group's fallback candidates, ``[(instance_type, instance_count)]`` in order of preference:
        #: the operator's ``fallback_instance_types`` (checked by :func:`fallback_problems`).
        self.fallbacks = fallbacks_of(request, fallbacks)

    @property
    def base_job_name(self) -> str:
        """The base of the task's job names: the given name, else the image's repository (the SDK's default)."""
        if self.given_name:
            return naming.sanitize_base(self.given_name)
        algorithm = self.request.get("AlgorithmSpecification") or {}
        image = algorithm.get("TrainingImage") or algorithm.get("AlgorithmName")
        return naming.base_name_from_image(str(image)) if image else "training"

    @property
    def name_note(self) -> str | None:
        """What the task log says when the request's own TrainingJobName is replaced."""
        if not self.given_name:
            return None
        return (
            f"The request's TrainingJobName '{self.given_name}' is replaced by the name derived for this "
            f"task instance (base '{self.base_job_name}'), so a retry finds its job; pass job_name= to choose it"
        )

    def build(self, *, job_name: str, region: str | None = None, role_arn: str | None = None) -> dict[str, Any]:
        """The request to send as ``job_name`` (a copy: the checked request stays as it was).

        ``role_arn``: the ARN a role name given as ``RoleArn`` expands to (required then). ``region``
        changes nothing: the request names its image itself.
        """
        problem = naming.check_job_name(job_name)
        if problem:
            raise JobDefinitionError([Problem("job_name", problem)], "invalid training job name")
        return self.steps.with_role_arn({"TrainingJobName": job_name, **copy.deepcopy(self.request)}, role_arn)

    def source_upload(self, job_name: str, base_dir: Path) -> None:
        """None: a request names its code's S3 location itself."""
        return None


def is_request_document(data: Mapping[str, Any]) -> bool:
    """A request, not a definition: its members are PascalCase (``RoleArn``), a definition's snake_case."""
    return any(isinstance(key, str) and key[:1].isupper() for key in data)


def check_request(data: Mapping[str, Any]) -> tuple[TrainingRequest, list[Problem]]:
    """The request (rendered numbers converted, no name, the provider's steps taken out) and every problem."""
    from airflow_hetero.definition.raw_request.service_shapes import check, operation_shapes

    rest = dict(data)
    given = rest.pop("TrainingJobName", None)
    steps, problems = take_provider_steps(rest)
    if given is not None and not isinstance(given, str):
        problems.append(Problem("TrainingJobName", "must be a string (the task derives the job's name from it)"))
        given = None
    converted, found = check(operation_shapes(OPERATION), {**rest, "TrainingJobName": _STAND_IN}, coerce=True)
    problems += [p.problem() for p in found]
    request = converted if isinstance(converted, dict) else rest
    request.pop("TrainingJobName", None)
    problems += service_rules.service_problems(request)
    problems += service_rules.sdk_problems(request)
    problems += service_rules.package_problems(request)
    return TrainingRequest(request, given or None, steps), unique(problems)


def fallbacks_of(request: Mapping[str, Any], argument: Mapping[str, Any] | None) -> dict[str, list[Candidate]]:
    """The groups' candidates from a checked ``fallback_instance_types`` argument (none: every list empty)."""
    return fallbacks.resolved(fallbacks.request_groups(request), {}, argument)


def fallback_problems(request: Mapping[str, Any], argument: Any) -> list[Problem]:
    """The operator's ``fallback_instance_types`` for ``request``: its entries, then the service's and the
    SDK's rules (:mod:`~airflow_hetero.definition.raw_request.service_rules`) on every candidate."""
    if argument is None:
        return []
    resource = request.get("ResourceConfig")
    hetero = isinstance(resource, Mapping) and bool(resource.get("InstanceGroups"))
    groups = fallbacks.request_groups(request)
    problems = fallbacks.argument_problems(argument, groups if hetero else [])
    if problems:
        return problems

    def rules(cluster: Sequence[fallbacks.Group]) -> list[Problem]:
        candidate = fallbacks.with_cluster(request, {name: (kind, count) for name, kind, count in cluster})
        return service_rules.service_problems(candidate) + service_rules.sdk_problems(candidate)

    lists = fallbacks_of(request, argument)
    return list(
        fallbacks.candidate_problems(groups, lists, rules, lambda name, index: (fallbacks.ARGUMENT, name, index))
    )


def load_request(source: Mapping[str, Any] | str | Path | TrainingRequest, *, fallbacks: Any = None) -> TrainingRequest:
    """A request from a mapping or a YAML/JSON file, checked; JobDefinitionError lists every problem.

    ``fallbacks``: the operator's ``fallback_instance_types`` (``{group: [type or {instance_type,
    instance_count}]}``), checked against the request's groups and kept as :attr:`TrainingRequest.fallbacks`.
    """
    if isinstance(source, TrainingRequest):
        if fallbacks is None:
            return source
        checked, problems = source, list[Problem]()
    elif not isinstance(source, Mapping):
        from airflow_hetero.definition.input_file import read_definition_file

        checked, problems = check_request(read_definition_file(Path(source)))
    else:
        checked, problems = check_request(source)
    problems = unique([*problems, *fallback_problems(checked.request, fallbacks)])
    if problems:
        raise JobDefinitionError(problems, TITLE)
    if fallbacks is None:
        return checked
    return TrainingRequest(checked.request, checked.given_name, checked.steps, fallbacks)
