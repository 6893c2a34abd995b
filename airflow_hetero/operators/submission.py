"""The walk of a task instance's job names and the submit block, one of each for direct and queue mode.

:func:`start` walks the names the task instance may use (first try, then fresh suffixes): a job of a name whose
identity is another task instance's counts as taken; one of ours is re-attached when it runs or succeeded (and
``on_existing_job`` is ``"reattach"``), else the walk goes on; the first free name is submitted, once
(docs/failure-semantics.md). :func:`submit` runs the pipeline's named and send phases, then (the request past
every policy: a refusal writes nothing) the provider's ``S3Operations`` and the local code upload, and hands
the request to the mode's :class:`JobKind` to send. What differs between the modes (a training job
or a service job; how it is found, owned, sent) is the :class:`JobKind`. Imported when the task runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

from airflow_hetero._compat import AirflowFailException

if TYPE_CHECKING:
    from airflow_hetero.definition.submittable import Submittable
    from airflow_hetero.job.identity import TaskIdentity
    from airflow_hetero.operators.pipeline import Draft, Pipeline, StepContext


class JobKind(Protocol):
    """A mode's jobs: how one is found by name, whose it is, whether to re-attach, how it is sent."""

    #: What the task log calls one ("Training job", "Service job").
    what: str

    def find(self, name: str) -> list[dict[str, Any]]:
        """The jobs of this name (newest first; none: the name is free)."""

    def owner(self, found: dict[str, Any]) -> str | None:
        """The identity digest a job carries (None: none)."""

    def status(self, found: dict[str, Any]) -> str:
        """Its status, as the service states it."""

    def continuing(self) -> bool:
        """True within a try that already submitted (a capacity fallback): ``on_existing_job="fail"`` waits."""

    def seen(self, name: str, found: dict[str, Any]) -> dict[str, Any]:
        """Note a job of ours met on the walk (what it cost, the chain's history); its description then."""

    def reattachable(self, found: dict[str, Any]) -> bool:
        """True when the job runs or succeeded: the walk re-attaches to it."""

    def payload(self, draft: Draft, identity: TaskIdentity) -> Any:
        """What is sent for the draft, checked before any upload (a refusal uploads nothing)."""

    def send(self, at: StepContext, built: Draft, sent: Draft, payload: Any, identity: TaskIdentity) -> dict[str, Any]:
        """Send it; the description the walk returns for a job just submitted."""


def start(
    at: StepContext,
    kind: JobKind,
    *,
    pipeline: Pipeline,
    job: Submittable,
    names: Iterator[str],
    identity: TaskIdentity,
) -> tuple[str, dict[str, Any], bool]:
    """This task instance's job: (name, its description, True when just submitted), re-attached or submitted."""
    from airflow_hetero.hooks.training import JobNameTakenError

    task = at.task
    at.run.steps_role_arn = None  # the provider steps run at this walk's first submit only
    at.run.s3_operations_done = False
    for name in names:
        found = kind.find(name)
        ours = [f for f in found if kind.owner(f) == identity.digest]
        if found and not ours:
            task.log.warning(
                "%s %s (%s) belongs to another task instance (identity %s, this one %s); trying the next name",
                kind.what,
                name,
                kind.status(found[0]),
                kind.owner(found[0]) or "none",
                identity.digest,
            )
            continue
        if not found:
            try:
                return name, submit(at, kind, pipeline=pipeline, job=job, name=name, identity=identity), True
            except JobNameTakenError as err:
                task.log.warning("%s; trying the next name", err)
                continue
        existing = ours[0]
        if task.on_existing_job == "fail" and not kind.continuing():
            raise AirflowFailException(
                f"{kind.what} {name} already exists ({kind.status(existing)}) and on_existing_job='fail'"
            )
        existing = kind.seen(name, existing)
        if task.on_existing_job == "reattach" and kind.reattachable(existing):
            task.log.info(
                "Re-attaching to %s %s (%s), not submitting a new one", kind.what.lower(), name, kind.status(existing)
            )
            return name, existing, False
        task.log.info("%s %s exists (%s); trying the next name", kind.what, name, kind.status(existing))
    raise AirflowFailException("Every job name for this task instance is taken")


def submit(
    at: StepContext, kind: JobKind, *, pipeline: Pipeline, job: Submittable, name: str, identity: TaskIdentity
) -> dict[str, Any]:
    """The pipeline's named and send phases, the provider's S3Operations run and the code uploaded (only then:
    a refusal of the pipeline or of the payload writes nothing), the request sent; the mode's description."""
    task = at.task
    built = pipeline.build(at, job, name, identity)
    if job.name_note and not task.job_name:
        task.log.warning("%s", job.name_note)
    sent = pipeline.finish(at, built)
    payload = kind.payload(sent, identity)
    if not at.run.s3_operations_done:  # once per walk: the next name after a name race reuses them
        from airflow_hetero.operators.provider_steps import run_s3_operations

        run_s3_operations(at.run.hook, job.steps, task.base_dir(), task.log)
        at.run.s3_operations_done = True
    upload = built.upload
    if upload is not None:
        at.run.hook.upload_bytes(upload.code, upload.uri, upload.extra_args)
        task.log.info("Uploaded training code (%d bytes) to %s", len(upload.code), upload.uri)
    return kind.send(at, built, sent, payload, identity)
