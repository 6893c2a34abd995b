"""HeteroTrainingOperator: submit a (heterogeneous) SageMaker training job once, wait, fail clearly.

* ``job`` is a :class:`~airflow_hetero.definition.job.HeteroTrainingJob`, a dict, or a YAML/JSON file path
  relative to the DAG file; or ``request`` is a CreateTrainingJob request in the same forms (request mode,
  :mod:`~airflow_hetero.definition.raw_request.training_request`). Every string in it may use Jinja. It is rendered with
  the other template fields (a file becomes its rendered dict, so Rendered Templates shows it) and
  validated right then: a template or definition error fails the task without retries.
* The job name is derived from ``base_job_name`` and a stable hash of dag_id, task_id, run_id and
  map index, so a retry of the task instance finds the job its earlier try started: a running
  job is re-attached, a completed one returns its result, a failed or stopped one is followed by
  a new job with a fresh suffix, a stopping one is waited for first. Only a job carrying this task
  instance's identity (:mod:`airflow_hetero.job.identity`) is ever re-attached; another job of
  the same name counts as taken. One job per logical attempt, never two (docs/failure-semantics.md).
* Every way the task ends while its job runs stops the job (kill, clear, mark failed/success,
  ``execution_timeout``, deadline), deferred or not; a triggerer restart does not.
* Waiting: synchronous (one DescribeTrainingJob per ``check_interval``, every SecondaryStatus
  transition logged once, logs of every host streamed with ``[group/host]`` prefixes) or
  deferred to :class:`~airflow_hetero.triggers.HeteroTrainingTrigger`.

Importing this module loads only ``airflow.sdk``, the extra links, the lineage mixin and the AWS and price
settings (:mod:`~airflow_hetero.hooks.aws_settings`, :mod:`~airflow_hetero.pricing.settings`); each step is a
method importing what it runs (a subclass may override one). A DAG file pays for the class and the
parse-time check (:mod:`~airflow_hetero.definition.validated`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from airflow_hetero._compat import AirflowFailException, BaseOperator, default_deferrable
from airflow_hetero.hooks.aws_settings import DEFAULT_AWS_CONN_ID, AwsSettings, aws_template_fields
from airflow_hetero.lineage.mixin import JobOutputsMixin, records_outputs
from airflow_hetero.links import training_links
from airflow_hetero.operators.capacity_fallback import JOB_NAME_XCOM_KEY, CapacityFallbackMixin
from airflow_hetero.operators.queue_mode import QueueModeMixin
from airflow_hetero.operators.rightsizing_steps import RightSizingMixin
from airflow_hetero.pricing.settings import PRICE_LIST_CURRENCY, PriceSettings

if TYPE_CHECKING:
    import jinja2

    from airflow_hetero._compat import Asset, Context
    from airflow_hetero.definition.job import HeteroTrainingJob
    from airflow_hetero.definition.submittable import Submittable
    from airflow_hetero.hooks.training import HeteroTrainingHook
    from airflow_hetero.job.batch_queue import BatchQueue
    from airflow_hetero.job.identity import TaskIdentity
    from airflow_hetero.job.outcome import TrainingJobLimitError
    from airflow_hetero.logs.tail import LogTailer

__all__ = ["JOB_NAME_XCOM_KEY", "HeteroTrainingOperator", "OnExistingJob"]

#: A string at run time: subscripting ``Literal`` costs a parse measurably, and only type checkers read it.
OnExistingJob: TypeAlias = 'Literal["reattach", "fail", "new"]'
_ON_EXISTING = ("reattach", "fail", "new")


class HeteroTrainingOperator(
    QueueModeMixin, RightSizingMixin, CapacityFallbackMixin, JobOutputsMixin, AwsSettings, BaseOperator
):
    """Run one SageMaker training job (heterogeneous or not) and return a plain result dict.

    :param job: the definition: a ``HeteroTrainingJob``, a dict, or a YAML/JSON path (relative
        paths resolve against the DAG file's folder). Templated, strings at any depth.
    :param request: instead of ``job``, a CreateTrainingJob request (the Amazon provider's ``config``,
        ``--cli-input-json``, what SDK v3 sends) as a dict or a YAML/JSON path; templated like ``job``.
        Its ``TrainingJobName``, if any, is replaced by the name derived per task instance.
    :param job_name: explicit job name (templated); default: derived per task instance.
    :param aws_conn_id, region_name, verify, botocore_config: the AWS connection, its region, TLS
        verification (False, or a CA bundle path) and ``botocore.config.Config`` options, as on the Amazon
        provider's operators (:mod:`airflow_hetero.hooks.aws_settings`).
    :param wait_for_completion: wait for the job to finish (else return once submitted).
    :param deferrable: wait in the triggerer (default: ``[operators] default_deferrable``).
    :param check_interval: seconds between status checks.
    :param max_ingestion_time: stop the job and fail when it runs longer than this many seconds
        after the task started waiting; None waits as long as the job may run.
    :param print_log: stream the job's logs into the task log (synchronous wait).
    :param fail_on_stopped: a Stopped job fails the task (default) or counts as success.
    :param on_existing_job: when a job of this task instance already exists: ``"reattach"`` (wait
        for it / return its result / replace a failed one), ``"fail"`` or ``"new"`` (always
        submit another job under a fresh suffix).
    :param model_asset: an Asset (or its URI, normally the definition's ``output_path``) this task
        updates when its job completes; the event's extra holds the job name, model artifact,
        instance groups, final metrics and the run's cost (docs/lineage.md). Needs ``wait_for_completion``.
    :param fallback_instance_types: instance group name -> the types to try, in order of preference, when
        SageMaker has no capacity for the group's type: each a type (the count stays) or ``{instance_type,
        instance_count}`` (docs/capacity.md). Request mode's only way to give them; in definition mode it
        replaces the definition's list of each group it names. Templated; checked at DAG parse like ``job``.
    :param capacity_attempts: at most this many clusters tried in one try of the task when SageMaker has
        no capacity (the job as written included); None: every cluster of the fallbacks (docs/capacity.md).
    :param capacity_retry_delay: seconds waited before submitting the next cluster (in the worker).
    :param prices: instance type -> price per instance-hour in ``currency`` for that cost (they win over
        the Price List Query API); ``use_pricing_api`` False: ask only these. As on the summary operator.
    :param max_cost: a budget in ``currency`` for every job of this task instance (retries and capacity
        fallbacks included): each job's MaxRuntimeInSeconds is lowered so its worst case fits what is left,
        and SageMaker stops it there (docs/cost.md). Templated; None: no budget.
    :param rightsizing: a :class:`~airflow_hetero.definition.rightsizing.RightSizing` (or its dict): the groups'
        counts decided from earlier runs' evidence, recommended or applied (docs/rightsizing.md). Templated.
    :param batch_queue: submit through this AWS Batch job queue (name or ARN) as one service job, or a
        ``BatchQueue`` with its share, priority, retry strategy and attempt timeout (docs/queue.md).
    """

    #: How long polls may keep failing transiently (each after its own retries) before the task
    #: fails; its retry then re-attaches to the still-running job.
    transient_grace_seconds: float = 1800
    #: "Not found" from DescribeTrainingJob this soon after our own create is eventual consistency;
    #: None: :data:`airflow_hetero.job.waiting.NOT_FOUND_GRACE_SECONDS`. Passed to the trigger too,
    #: so an override holds once the task defers.
    not_found_grace_seconds: float | None = None
    #: A job staying Stopping longer than this fails the task (with its name and state).
    stopping_timeout_seconds: float = 1800
    #: The role ARN (None: no role name) once the provider steps ran in this ``start_job``: they run at
    #: its first submit, and the next candidate name after a name race reuses them (uploads once).
    steps_role_arn: tuple[str | None] | None = None
    #: A budget that leaves a job less run time than this refuses before submitting (docs/cost.md); equal to
    #: :data:`airflow_hetero.job.budget.DEFAULT_MIN_RUNTIME_SECONDS` (not imported at DAG parse; a test pins it).
    budget_min_runtime_seconds: int = 300
    #: Seconds a job stopped at its cap may still bill (None: SageMaker's 120 s SIGTERM window).
    budget_stop_window_seconds: int | None = None

    template_fields: Sequence[str] = aws_template_fields(
        "job", "request", "job_name", "fallback_instance_types", "max_cost", "rightsizing", "batch_queue"
    )
    template_fields_renderers = {
        "job": "json",
        "request": "json",
        "fallback_instance_types": "json",
        "rightsizing": "json",
    }
    operator_extra_links = training_links()  # Airflow 3: stand-ins, the link classes load in the worker
    ui_color = "#ede4ff"

    def __init__(
        self,
        *,
        job: HeteroTrainingJob | Mapping[str, Any] | str | os.PathLike[str] | None = None,
        request: Mapping[str, Any] | str | os.PathLike[str] | None = None,
        job_name: str | None = None,
        fallback_instance_types: Mapping[str, Sequence[str | Mapping[str, Any]]] | str | None = None,
        aws_conn_id: str | None = DEFAULT_AWS_CONN_ID,
        region_name: str | None = None,
        verify: bool | str | None = None,
        botocore_config: dict[str, Any] | None = None,
        wait_for_completion: bool = True,
        deferrable: bool | None = None,
        check_interval: float = 30,
        max_ingestion_time: float | None = None,
        print_log: bool = True,
        fail_on_stopped: bool = True,
        on_existing_job: OnExistingJob = "reattach",
        capacity_attempts: int | None = None,
        capacity_retry_delay: float = 0,
        model_asset: Asset | str | None = None,
        prices: Mapping[str, float] | None = None,
        currency: str = PRICE_LIST_CURRENCY,
        use_pricing_api: bool = True,
        max_cost: float | str | None = None,
        rightsizing: Any = None,
        batch_queue: str | BatchQueue | None = None,
        **kwargs: Any,
    ) -> None:
        if model_asset is not None and not wait_for_completion:
            raise ValueError("model_asset needs wait_for_completion=True (or set it on the sensor that waits)")
        super().__init__(**kwargs)
        self.set_aws_settings(aws_conn_id, region_name, verify, botocore_config)
        self.price_settings = PriceSettings.of(prices, currency, use_pricing_api)  # a bad price fails the parse
        self.model_asset = self.declare_model_asset(model_asset)
        if on_existing_job not in _ON_EXISTING:
            raise ValueError(f"on_existing_job must be one of {_ON_EXISTING}, got {on_existing_job!r}")
        if check_interval <= 0:
            raise ValueError(f"check_interval must be positive, got {check_interval}")
        if (job is None) == (request is None):
            given = "both" if job is not None else "neither"
            raise ValueError(f"give job= (a definition) or request= (a CreateTrainingJob request), not {given}")
        from airflow_hetero.definition.validated import check_at_parse

        fallbacks = fallback_instance_types  # checked with the job or request it belongs to
        self.job: Mapping[str, Any] | str | None = check_at_parse(
            job, request=False, fallbacks=fallbacks if job is not None else None
        )
        self.request: Mapping[str, Any] | str | None = check_at_parse(
            request, request=True, fallbacks=fallbacks if request is not None else None
        )
        self.fallback_instance_types = fallback_instance_types
        self.set_rightsizing(rightsizing)  # checked now, against the job when both are plain data
        self.job_name = job_name
        self.wait_for_completion = wait_for_completion
        self.deferrable = default_deferrable() if deferrable is None else deferrable
        self.check_interval = check_interval
        self.max_ingestion_time = max_ingestion_time
        self.print_log = print_log
        self.fail_on_stopped = fail_on_stopped
        self.on_existing_job = on_existing_job
        self.set_capacity_arguments(capacity_attempts, capacity_retry_delay)
        if isinstance(max_cost, int | float) and not max_cost > 0:  # a template is checked once rendered
            raise ValueError(f"max_cost must be a positive number, got {max_cost!r}")
        self.max_cost = max_cost
        self.set_batch_queue(batch_queue, fallback_instance_types, self.job)  # after job_name: its length
        self.earlier_jobs: dict[str, dict[str, Any]] = {}  # this task instance's jobs seen: what they cost
        self.active_job_name: str | None = None  # the job on_kill stops
        self.waiting_hook: HeteroTrainingHook | None = None  # the wait's hook: on_kill stops through its client
        self.submitted_at: float | None = None  # epoch of our own CreateTrainingJob (not-found grace)
        self.wait_limit: float | None = None  # the submitted job's MaxRuntime (+ MaxWait) + margin

    # -- the definition ----------------------------------------------------------------------

    def base_dir(self) -> Path:
        """The DAG file's folder: relative definition paths and source_dir resolve against it."""
        fileloc = getattr(self.dag, "fileloc", None) if self.has_dag() else None  # type: ignore[no-untyped-call]
        return Path(fileloc).resolve().parent if fileloc else Path.cwd()

    def render_template_fields(self, context: Context, jinja_env: jinja2.Environment | None = None) -> None:
        """Render the template fields, then the definition file itself, and validate the result.

        A file definition becomes its rendered dict, so Rendered Templates shows the final
        definition. A template or definition error cannot succeed on a retry: it fails the task
        without retries (``AirflowFailException``).
        """
        import jinja2

        try:
            super().render_template_fields(context, jinja_env)
            if isinstance(self.job, str):
                self.job = self.render_definition_file(self.job, context, jinja_env)
            if isinstance(self.request, str):
                self.request = self.render_definition_file(self.request, context, jinja_env)
        except jinja2.TemplateError as err:
            raise AirflowFailException(f"Task {self.task_id}: template error: {type(err).__name__}: {err}") from err
        self.load_definition(context)  # invalid after rendering: fail now, before any AWS call

    def render_definition_file(
        self, path: str, context: Context, jinja_env: jinja2.Environment | None = None
    ) -> dict[str, Any]:
        """Read a YAML/JSON definition (relative to the DAG folder) and render Jinja in every string."""
        from airflow_hetero.definition.errors import JobDefinitionError
        from airflow_hetero.definition.input_file import read_definition_file

        file = Path(path)
        try:
            data = read_definition_file(file if file.is_absolute() else self.base_dir() / file)
        except JobDefinitionError as err:
            raise AirflowFailException(f"Task {self.task_id}: {err}") from err
        rendered: dict[str, Any] = self.render_template(data, context, jinja_env)
        return rendered

    def load_definition(self, context: Context) -> Submittable:
        """The rendered definition (or request), validated; definition errors fail without retries."""
        from airflow_hetero.definition.errors import JobDefinitionError
        from airflow_hetero.definition.submittable import load_submittable

        source = self.job if self.request is None else self.request
        if isinstance(source, str):  # not rendered yet (execute() called directly)
            source = self.render_definition_file(source, context)
        try:
            return load_submittable(
                source or {}, request=self.request is not None, fallbacks=self.fallback_instance_types
            )
        except JobDefinitionError as err:
            raise AirflowFailException(f"Task {self.task_id}: {err}") from err

    # -- starting or re-attaching the task instance's job --------------------------------------

    def candidate_names(self, job: Submittable, context: Context) -> Iterator[str]:
        """Job names this task instance may use, in order: first try, then fresh suffixes."""
        from airflow_hetero.definition import naming

        if not self.job_name:
            ti: Any = context["ti"]
            return naming.task_job_names(job.base_job_name, ti.dag_id, ti.task_id, ti.run_id, ti.map_index)
        try:  # the longest name this task may use must be valid before the first job is sent
            return iter(naming.explicit_job_names(self.job_name))
        except ValueError as err:
            raise AirflowFailException(f"job_name: {err}") from err

    def start_job(
        self, hook: HeteroTrainingHook, job: Submittable, context: Context, region: str
    ) -> tuple[str, dict[str, Any] | None]:
        """Re-attach to this task instance's job or submit a new one; the name and its description.

        The description is None for a job just submitted. A job of a candidate name whose identity
        is not this task instance's counts as taken (warning, next name); a stopping one of ours
        (a clear stopped it) is waited for, then replaced (docs/failure-semantics.md).
        """
        from airflow_hetero.hooks.training import JobNameTakenError
        from airflow_hetero.job.identity import TaskIdentity
        from airflow_hetero.job.outcome import classify

        identity = TaskIdentity.of(context["ti"])
        self.steps_role_arn = None  # the provider steps run at this start's first submit only
        for name in self.candidate_names(job, context):
            existing = hook.find_training_job(name)
            if existing is None:
                try:
                    self.submit(hook, job, name, region, identity)
                except JobNameTakenError as err:
                    self.log.warning("%s; trying the next name", err)
                    continue
                return name, None
            owner = hook.identity_of(existing)
            status = existing.get("TrainingJobStatus")
            if owner != identity.digest:
                self.log.warning(
                    "Training job %s (%s) belongs to another task instance (identity %s, this one %s); "
                    "trying the next name",
                    name,
                    status,
                    owner or "none",
                    identity.digest,
                )
                continue
            continuing = self.chain is not None and not self.chain.new_round  # a fallback within this try
            if self.on_existing_job == "fail" and not continuing:
                raise AirflowFailException(f"Training job {name} already exists ({status}) and on_existing_job='fail'")
            if status == "Stopping" and self.on_existing_job == "reattach":
                existing = self.wait_stopped(hook, name)
            self.earlier_jobs[name] = existing  # counted by a budget (docs/cost.md)
            if self.chain is not None and (continuing or self.on_existing_job == "reattach"):
                self.chain.observe(name, existing)  # the chain's history is its jobs (docs/capacity.md)
            state = classify(existing)
            if self.on_existing_job == "reattach" and state in ("running", "succeeded"):
                self.log.info("Re-attaching to training job %s (%s), not submitting a new one", name, status)
                return name, existing
            self.log.info("Training job %s exists (%s); trying the next name", name, existing.get("TrainingJobStatus"))
        raise AirflowFailException("Every job name for this task instance is taken")

    def submit(
        self, hook: HeteroTrainingHook, job: Submittable, name: str, region: str, identity: TaskIdentity
    ) -> None:
        """Run what comes before the create (a request's provider steps, a definition's local code upload),
        then send the one CreateTrainingJob (identity stamped)."""
        from airflow_hetero.job.resource_config import describe_groups, instance_groups, is_hetero
        from airflow_hetero.job.waiting import wait_limit_seconds
        from airflow_hetero.operators.provider_steps import run_provider_steps

        base = self.base_dir()
        try:  # a definition, source_dir or config error (JobDefinitionError, SourceDirError: ValueErrors) fails
            if self.steps_role_arn is None:  # not yet in this start_job: a name race moves on without them
                self.steps_role_arn = (run_provider_steps(hook, job.steps, base, self.log),)
            (role_arn,) = self.steps_role_arn
            request = identity.stamp(job.build(job_name=name, region=region, role_arn=role_arn))
            upload = job.source_upload(name, base)
        except ValueError as err:
            raise AirflowFailException(f"Task {self.task_id}: {err}") from err
        if job.name_note and not self.job_name:
            self.log.warning("%s", job.name_note)
        if upload is not None:
            hook.upload_bytes(upload.code, upload.uri, upload.extra_args)
            self.log.info("Uploaded training code (%d bytes) to %s", len(upload.code), upload.uri)
        answer, request = self.create(hook, job, name, request, identity)
        self.wait_limit = wait_limit_seconds(request)
        groups = describe_groups(instance_groups(request)) if is_hetero(request) else ""
        how = "Adopted (the create's answer was lost)" if answer.get("Adopted") else "Submitted"
        self.log.info("%s training job %s (%s) %s", how, name, answer.get("TrainingJobArn"), groups)

    def fit_budget(self, hook: HeteroTrainingHook, request: dict[str, Any]) -> dict[str, Any]:
        """``request`` within ``max_cost`` (the earlier jobs of this task instance counted); as is without one."""
        if self.max_cost is None:
            return request
        from airflow_hetero.operators.budget_steps import fit_budget
        from airflow_hetero.sagemaker_facts import STOP_SIGNAL_WINDOW_SECONDS

        window = self.budget_stop_window_seconds
        return fit_budget(
            hook,
            request,
            [d for n, d in self.earlier_jobs.items() if n != request.get("TrainingJobName")],
            max_cost=self.max_cost,
            settings=self.price_settings,
            min_runtime=self.budget_min_runtime_seconds,
            stop_window=STOP_SIGNAL_WINDOW_SECONDS if window is None else window,
            task_id=self.task_id,
            log=self.log,
        )

    def budget_stopped(self, hook: HeteroTrainingHook, err: TrainingJobLimitError) -> TrainingJobLimitError:
        """The budget's error for a job SageMaker stopped at the cap a budget set; ``err`` otherwise (no
        budget, or a limit the job was given itself)."""
        if self.max_cost is None:
            return err
        from airflow_hetero.operators.budget_steps import budget_stop

        return budget_stop(hook, err, self.log)

    def wait_stopped(self, hook: HeteroTrainingHook, name: str) -> dict[str, Any]:
        """Wait (bounded by ``stopping_timeout_seconds``) for a Stopping job to end; its last description."""
        from airflow_hetero.job.outcome import still_stopping_error

        self.log.info("Training job %s is stopping (the task was cleared or killed): waiting for it to end", name)
        since = time.monotonic()
        while True:
            describe = hook.describe_training_job(name)
            if describe.get("TrainingJobStatus") != "Stopping":
                return describe
            if time.monotonic() - since > self.stopping_timeout_seconds:
                raise still_stopping_error(name, self.stopping_timeout_seconds)
            time.sleep(self.check_interval)

    # -- running: submit or re-attach, then wait or defer --------------------------------------

    @records_outputs
    def execute(self, context: Context) -> dict[str, Any]:
        """Submit or re-attach, then wait (or defer) and return the result dict."""
        from airflow_hetero.job.outcome import (
            TrainingJobFailedError,
            TrainingJobLimitError,
            classify,
            resolve_outcome,
            result_dict,
        )

        if self.batch_queue is not None:
            return self.execute_queued(context)
        started = time.monotonic()
        started_at = time.time()
        job = self.rightsize(self.load_definition(context), context)  # apply: the decided counts (docs/rightsizing.md)
        hook = self.waiting_hook = self.make_hook()
        self.chain = self.capacity_chain(job)
        name, describe = self.attach(hook, job, context)
        if describe is not None and classify(describe) == "succeeded":
            self.log.info("Training job %s already completed: returning its result", name)
            return self.with_attempts(resolve_outcome(describe, fail_on_stopped=self.fail_on_stopped))
        if not self.wait_for_completion:
            return self.with_attempts(result_dict(describe or self.describe_fresh(hook, name)))
        if self.deferrable:
            self.defer_wait(name, started_at)
        while True:  # a job failed for lack of capacity is followed by the next cluster's (docs/capacity.md)
            try:
                return self.with_attempts(self.wait(hook, name, describe, started))
            except TrainingJobFailedError as err:
                if not self.capacity_failed(err):
                    raise
            except TrainingJobLimitError as err:
                raise self.budget_stopped(hook, err) from err.__cause__
            name, describe = self.attach(hook, job, context)

    def describe_if_visible(self, hook: HeteroTrainingHook, name: str) -> dict[str, Any] | None:
        """DescribeTrainingJob; None while the job this task just created is not visible yet."""
        from airflow_hetero.job.waiting import NOT_FOUND_YET, not_found_yet

        try:
            return hook.describe_training_job(name)
        except Exception as exc:
            if not not_found_yet(exc, self.submitted_at, self.not_found_grace_seconds):
                raise
            self.log.warning(NOT_FOUND_YET, name)
            return None

    def describe_fresh(self, hook: HeteroTrainingHook, name: str) -> dict[str, Any]:
        """DescribeTrainingJob, waiting out "not found" within the grace period after our own create."""
        while (describe := self.describe_if_visible(hook, name)) is None:
            time.sleep(min(self.check_interval, 5.0))
        return describe

    def wait(
        self, hook: HeteroTrainingHook, name: str, describe: dict[str, Any] | None, started: float
    ) -> dict[str, Any]:
        """Synchronous wait: one DescribeTrainingJob per check_interval until the job finishes
        (:class:`~airflow_hetero.operators.sync_wait.SyncWait`)."""
        from airflow_hetero.operators.sync_wait import SyncWait

        return SyncWait(self, hook, name).run(describe, started)

    def log_transitions(self, name: str, describe: dict[str, Any], logged: int) -> int:
        """Write each new SecondaryStatus transition once, with its StatusMessage."""
        transitions = describe.get("SecondaryStatusTransitions") or []
        for item in transitions[logged:]:
            self.log.info("Training job %s: %s - %s", name, item.get("Status"), item.get("StatusMessage") or "")
        return max(logged, len(transitions))

    def make_tailer(self, hook: HeteroTrainingHook, name: str, describe: dict[str, Any]) -> LogTailer:
        """A log follower for every host of the job, prefixing lines with ``[group/host]``."""
        return hook.log_tailer(name, emit=lambda line: self.log.info("%s", line), describe=describe)

    # -- deferred: the trigger waits, execute_complete decides ---------------------------------

    def defer_wait(self, name: str, started_at: float | None = None) -> None:
        """Hand the wait to the triggerer (deadlines counted from the task's start, see DeferredWait)."""
        from airflow_hetero.operators.deferred_wait import DeferredWait

        DeferredWait(self).defer(name, started_at)

    @records_outputs
    def execute_complete(
        self, context: Context, event: dict[str, Any], capacity: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Resume after deferral: same outcome rules and XCom as the synchronous wait. ``capacity``: a job
        with fallbacks' attempts so far and the task's start; a capacity failure submits the next cluster
        and defers again (:class:`~airflow_hetero.operators.deferred_wait.DeferredWait`)."""
        from airflow_hetero.operators.deferred_wait import DeferredWait

        return DeferredWait(self).resume(context, event, capacity)

    # -- every other end of the task stops its job ---------------------------------------------

    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context) -> Any:
        """A deferral that ends in Airflow's ``__fail__`` (deferral or execution timeout, trigger
        crash) stops this task instance's running job before the task fails."""
        if next_method == "__fail__":
            try:
                self.stop_own_job(context)
            except Exception as exc:  # the failure Airflow reports must still be raised below
                self.log.error("Could not stop the training job of this task instance: %s", exc)
        return super().resume_execution(next_method, next_kwargs, context)

    def stop_own_job(self, context: Context) -> str | None:
        """Find this task instance's running job by its candidate names and identity; stop it."""
        from airflow_hetero.job.identity import TaskIdentity
        from airflow_hetero.job.outcome import classify

        if self.batch_queue is not None:
            return self.terminate_own_service_job(context)
        job = self.load_definition(context)
        hook = self.make_hook()
        digest = TaskIdentity.of(context["ti"]).digest
        for name in self.candidate_names(job, context):
            existing = hook.find_training_job(name)
            if existing is None:
                return None  # names are used in order: no later one exists
            if classify(existing) == "running" and hook.identity_of(existing) == digest:
                self.log.info("Task ends while training job %s runs: stopping it", name)
                hook.stop_training_job(name)
                return name
        return None

    def on_kill(self) -> None:
        """Stop the job this task started or re-attached to (a killed task must not leave it running).

        Airflow 3 runs this in the SIGTERM handler, which can interrupt a log write: a log call (or a new
        hook, which logs) would wait for ever on its lock. So: stop first, with the wait's client; log after.
        """
        name = self.active_job_name
        if self.terminate_queued("The Airflow task was killed") or not name:
            return
        (self.waiting_hook or self.make_hook()).stop_training_job(name)
        self.log.info("Task killed: asked training job %s to stop", name)
