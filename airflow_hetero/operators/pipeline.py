"""The one path from a loaded job to the request sent: the pre-submit policies, in the order they run.

Every submission of the training operator runs a :class:`Pipeline`: direct mode :data:`DIRECT`, queue mode
:data:`QUEUED` (no capacity step: Batch requeues on CapacityError itself, and fallbacks are refused), and the
resume after a deferral runs the same one again. No other code calls a policy. A pipeline has three phases:

1. **job** steps, once per run, before the task instance's job names are walked (``Submittable`` in and out):
   right-sizing's decided counts and types;
2. **named** steps, once per job name submitted: the request built for the name (a role name expanded to its
   ARN), the task instance's identity stamped on it, the code to upload found;
3. **send** steps, for every request sent (a capacity refusal sends the next cluster through them again):
   the capacity fallback's next cluster, then the budget's runtime cap.

Each step is one small class taking the :class:`StepContext` and with one method, ``apply``, of its phase's
shape; what it records goes into the run's :class:`~airflow_hetero.operators.run_state.TrainingRun`. No step
writes anything: what is written before the send (the provider's ``S3Operations``, the local code) is written
after the send phase (:func:`airflow_hetero.operators.submission.submit`), so a refusal writes nothing. A new
policy is a class here and a place in the tuples (docs/architecture.md, "Adding a pre-submit policy").
Imported when the task runs, never at DAG parse.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from airflow_hetero._compat import AirflowFailException

if TYPE_CHECKING:
    from airflow_hetero.definition.builder.source import SourceUpload
    from airflow_hetero.definition.submittable import Submittable
    from airflow_hetero.job.identity import TaskIdentity
    from airflow_hetero.operators.run_state import TrainingRun
    from airflow_hetero.operators.task_settings import SubmitSettings


@dataclass(frozen=True)
class StepContext:
    """What a step may read (the task's settings) and record (the run's state)."""

    task: SubmitSettings
    run: TrainingRun


@dataclass(frozen=True)
class Draft:
    """A request on its way: the job it is built from, its name, the request, the local code to upload first."""

    job: Submittable
    name: str
    request: dict[str, Any]
    upload: SourceUpload | None = None


class JobStep(Protocol):
    """A step of the job phase: the job as this run submits it."""

    def __init__(self, at: StepContext) -> None: ...

    def apply(self, job: Submittable) -> Submittable: ...


class NamedStep(Protocol):
    """A step of the named phase: the draft of a job name (the first step builds it from ``draft.job``)."""

    def __init__(self, at: StepContext) -> None: ...

    def apply(self, draft: Draft, identity: TaskIdentity) -> Draft: ...


class SendStep(Protocol):
    """A step of the send phase: the request about to be sent."""

    def __init__(self, at: StepContext) -> None: ...

    def apply(self, draft: Draft) -> Draft: ...


# -- the steps -----------------------------------------------------------------------------------


class RightSize:
    """Right-sizing (``rightsizing=``, docs/rightsizing.md): decide once per run from earlier runs' evidence,
    push the decision; in ``apply`` mode the job runs the decided counts and types."""

    def __init__(self, at: StepContext) -> None:
        self.at = at

    def apply(self, job: Submittable) -> Submittable:
        if self.at.task.rightsizing is None:
            return job
        from airflow_hetero.operators.rightsizing_steps import rightsized

        return rightsized(self.at.task, self.at.run, job)


class NoFallbacks:
    """Queue mode refuses fallback types: Batch requeues a job that met a CapacityError itself (docs/queue.md)."""

    def __init__(self, at: StepContext) -> None:
        self.at = at

    def apply(self, job: Submittable) -> Submittable:
        if any(job.fallbacks.values()):
            from airflow_hetero.job.batch_queue import FALLBACKS_WITH_QUEUE

            raise AirflowFailException(f"Task {self.at.task.task_id}: {FALLBACKS_WITH_QUEUE}")
        return job


class BuildRequest:
    """The request for the name, the task instance's identity stamped on it; before it, a role name expanded
    (once per walk: the next name after a name race reuses its ARN); the local code to upload (uploaded, with
    the provider's ``S3Operations``, only once the send phase passed)."""

    def __init__(self, at: StepContext) -> None:
        self.at = at

    def apply(self, draft: Draft, identity: TaskIdentity) -> Draft:
        from airflow_hetero.operators.provider_steps import expand_role

        task, run = self.at.task, self.at.run
        base = task.base_dir()
        job = draft.job
        try:  # a definition, source_dir or config error (JobDefinitionError, SourceDirError: ValueErrors) fails
            if run.steps_role_arn is None:
                run.steps_role_arn = (expand_role(run.hook, job.steps, task.log),)
            (role_arn,) = run.steps_role_arn
            region = run.hook.conn_region_name
            request = identity.stamp(job.build(job_name=draft.name, region=region, role_arn=role_arn))
            upload = job.source_upload(draft.name, base)
        except ValueError as err:
            raise AirflowFailException(f"Task {task.task_id}: {err}") from err
        return replace(draft, request=request, upload=upload)


class NextCluster:
    """The capacity fallback (docs/capacity.md): the request on the chain's next cluster, tagged with its
    attempt; the capacity error when no cluster is left. As it is for a job without fallbacks."""

    def __init__(self, at: StepContext) -> None:
        self.at = at

    def apply(self, draft: Draft) -> Draft:
        chain = self.at.run.chain
        if chain is None:
            return draft
        from airflow_hetero.operators.capacity_fallback import request_of_next

        return replace(draft, request=request_of_next(self.at.task, chain, draft.job, draft.request))


class FitBudget:
    """The budget (``max_cost``, docs/cost.md): the request's runtime cap so that its worst case fits what the
    task instance's earlier jobs left; a refusal before anything is sent when it cannot."""

    def __init__(self, at: StepContext) -> None:
        self.at = at

    def apply(self, draft: Draft) -> Draft:
        task, run = self.at.task, self.at.run
        if task.max_cost is None:
            return draft
        from airflow_hetero.operators.budget_steps import fit_budget
        from airflow_hetero.sagemaker_facts import STOP_SIGNAL_WINDOW_SECONDS

        window = task.budget_stop_window_seconds
        request = fit_budget(
            run.hook,
            draft.request,
            [d for n, d in run.earlier_jobs.items() if n != draft.request.get("TrainingJobName")],
            max_cost=task.max_cost,
            settings=task.price_settings,
            min_runtime=task.budget_min_runtime_seconds,
            stop_window=STOP_SIGNAL_WINDOW_SECONDS if window is None else window,
            task_id=task.task_id,
            log=task.log,
        )
        return replace(draft, request=request)


# -- the pipelines -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Pipeline:
    """The steps of each phase, in the order they run (the module docstring)."""

    job: tuple[type[JobStep], ...]
    named: tuple[type[NamedStep], ...]
    send: tuple[type[SendStep], ...]

    def prepare(self, at: StepContext, job: Submittable) -> Submittable:
        """The job phase: the job as this run submits it."""
        for step in self.job:
            job = step(at).apply(job)
        return job

    def build(self, at: StepContext, job: Submittable, name: str, identity: TaskIdentity) -> Draft:
        """The named phase: the request for ``name``."""
        draft = Draft(job=job, name=name, request={})
        for step in self.named:
            draft = step(at).apply(draft, identity)
        return draft

    def finish(self, at: StepContext, draft: Draft) -> Draft:
        """The send phase: the request as it is sent."""
        for step in self.send:
            draft = step(at).apply(draft)
        return draft


#: Direct mode (one CreateTrainingJob per job name): right-size -> build and stamp -> next cluster -> budget.
DIRECT = Pipeline(job=(RightSize,), named=(BuildRequest,), send=(NextCluster, FitBudget))
#: Queue mode (one SubmitServiceJob per job name, the request as its payload): as direct mode without the
#: capacity fallback, which it refuses.
QUEUED = Pipeline(job=(RightSize, NoFallbacks), named=(BuildRequest,), send=(FitBudget,))
