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

The operator composes its parts; it holds the arguments and their checks at DAG parse, and each run is a
:class:`~airflow_hetero.operators.run_state.TrainingRun` handed to the part that runs it: direct mode
(:mod:`~airflow_hetero.operators.direct_run`), queue mode (:mod:`~airflow_hetero.operators.queue_steps`), the
resume after a deferral (:mod:`~airflow_hetero.operators.deferred_wait`). What turns the loaded job into the request
sent is one stated pipeline (:mod:`~airflow_hetero.operators.pipeline`). Importing this module loads only
``airflow.sdk``, the extra links, the lineage mixin and the AWS and price settings; a DAG file pays for the
class and the parse-time check (:mod:`~airflow_hetero.definition.validated`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from airflow_hetero._compat import AirflowFailException, BaseOperator, ResumableJobMixin, default_deferrable
from airflow_hetero.definition.validated import check_at_parse
from airflow_hetero.links import training_links
from airflow_hetero.task_arguments import DEFAULT_AWS_CONN_ID, AwsSettings, TaskPrices, aws_template_fields

if TYPE_CHECKING:
    import jinja2
    from airflow.providers.openlineage.extractors import OperatorLineage
    from pydantic import JsonValue

    from airflow_hetero._compat import Asset, Context
    from airflow_hetero.definition.job import HeteroTrainingJob
    from airflow_hetero.definition.submittable import Submittable
    from airflow_hetero.hooks.training import HeteroTrainingHook
    from airflow_hetero.job.batch_queue import BatchQueue
    from airflow_hetero.operators.capacity_argument import CapacityFallback
    from airflow_hetero.operators.durable import DurableRun
    from airflow_hetero.operators.run_state import TrainingRun
    from airflow_hetero.pricing.billing import BilledCost
    from airflow_hetero.pricing.settings import PriceSettings

# and JOB_NAME_XCOM_KEY, lazily (module __getattr__)
__all__ = ["HeteroTrainingOperator", "OnExistingJob"]

#: A string at run time: subscripting ``Literal`` costs a parse measurably, and only type checkers read it.
OnExistingJob: TypeAlias = 'Literal["reattach", "fail", "new"]'
#: Each ``on_existing_job`` and the ``durable`` it is (docs/failure-semantics.md): only "reattach" re-attaches.
_DURABLE_OF = {"reattach": True, "fail": False, "new": False}


def durability(durable: bool | None, on_existing_job: str | None) -> tuple[bool, str]:
    """(durable, on_existing_job), the one defined through the other: ``durable=True`` is ``"reattach"``,
    ``durable=False`` is ``"new"`` (or ``"fail"``, given); a contradictory pair is refused."""
    if on_existing_job is None:
        on_existing_job = "new" if durable is False else "reattach"
    if on_existing_job not in _DURABLE_OF:
        raise ValueError(f"on_existing_job must be one of {tuple(_DURABLE_OF)}, got {on_existing_job!r}")
    implied = _DURABLE_OF[on_existing_job]
    if durable is not None and durable is not implied:
        raise ValueError(
            f"durable={durable} contradicts on_existing_job={on_existing_job!r}: a durable task re-attaches to its "
            "job ('reattach'); durable=False is 'new' (or 'fail'). Give one of them"
        )
    return implied, on_existing_job


def __getattr__(name: str) -> Any:
    """``JOB_NAME_XCOM_KEY``, from :mod:`airflow_hetero.xcom_keys` (where every key the tasks exchange is), and
    ``CapacityFallback`` (:mod:`airflow_hetero.operators.capacity_argument`), loaded when asked for."""
    if name == "JOB_NAME_XCOM_KEY":
        from airflow_hetero.xcom_keys import JOB_NAME_XCOM_KEY

        return JOB_NAME_XCOM_KEY
    if name == "CapacityFallback":
        from airflow_hetero.operators.capacity_argument import CapacityFallback

        return CapacityFallback
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: The capacity arguments before ``capacity=`` (:mod:`~airflow_hetero.operators.capacity_argument`); their
#: presence, in the keyword arguments or ``default_args``, is all a task without ``capacity=`` checks at parse.
_OLD_CAPACITY = ("fallback_instance_types", "capacity_attempts", "capacity_retry_delay")


def _capacity_of(capacity: Any, kwargs: dict[str, Any]) -> tuple[Any, int | None, float]:
    """(types, attempts, retry delay) of ``capacity=`` or the old arguments; none given: no fallbacks, and no
    import."""
    default_args = kwargs.get("default_args") or {}
    if capacity is None and not any(name in kwargs or name in default_args for name in _OLD_CAPACITY):
        return None, None, 0.0
    from airflow_hetero.operators.capacity_argument import capacity_of

    return capacity_of(capacity, kwargs)


class HeteroTrainingOperator(AwsSettings, TaskPrices, ResumableJobMixin, BaseOperator):
    """Run one SageMaker training job (heterogeneous or not) and return a plain result dict.

    :param job: the definition: a ``HeteroTrainingJob``, a dict, or a YAML/JSON path (relative
        paths resolve against the DAG file's folder). Templated, strings at any depth.
    :param request: instead of ``job``, a CreateTrainingJob request (the Amazon provider's ``config``,
        ``--cli-input-json``, what SDK v3 sends) as a dict or a YAML/JSON path; templated like ``job``.
        Its ``TrainingJobName``, if any, is replaced by the name derived per task instance.
    :param job_name: explicit job name (templated); default: derived per task instance.
    :param aws_conn_id, region_name, verify, botocore_config: the AWS connection, its region, TLS
        verification (False, or a CA bundle path) and ``botocore.config.Config`` options, as on the Amazon
        provider's operators (:mod:`airflow_hetero.task_arguments`).
    :param wait_for_completion: wait for the job to finish (else return once submitted).
    :param deferrable: wait in the triggerer (default: ``[operators] default_deferrable``).
    :param check_interval: seconds between status checks.
    :param max_ingestion_time: stop the job and fail when it runs longer than this many seconds
        after the task started waiting; None waits as long as the job may run.
    :param print_log: stream the job's logs into the task log (synchronous wait).
    :param fail_on_stopped: a Stopped job fails the task (default) or counts as success.
    :param on_existing_job: when a job of this task instance already exists: ``"reattach"`` (wait
        for it / return its result / replace a failed one), ``"fail"`` or ``"new"`` (always
        submit another job under a fresh suffix). Default: ``"reattach"`` (``"new"`` with ``durable=False``).
    :param durable: Airflow's ``ResumableJobMixin`` argument: True (the default) is ``on_existing_job="reattach"``,
        and on Airflow 3.3+ the job is kept in the task state store, which a retry reads first; False is
        ``on_existing_job="new"`` (a retry submits a new job). A contradictory pair fails the parse
        (docs/failure-semantics.md).
    :param model_asset: an Asset (or its URI, normally the definition's ``output_path``) this task
        updates when its job completes; the event's extra holds the job name, model artifact,
        instance groups, final metrics and the run's cost (docs/lineage.md). Needs ``wait_for_completion``.
    :param capacity: a :class:`CapacityFallback` (or its dict): each group's fallback types when SageMaker has no
        capacity for its type, how many clusters one try may send, the wait before the next (docs/capacity.md).
        Its ``types`` are templated and checked at DAG parse like ``job``. (``fallback_instance_types=``,
        ``capacity_attempts=`` and ``capacity_retry_delay=`` still work for one release, with a warning.)
    :param prices: instance type -> price per instance-hour in USD (they win over the Price List Query API),
        or a :class:`~airflow_hetero.pricing.settings.PriceSettings` (``PriceSettings.of(prices, currency,
        use_pricing_api)``: another currency, or the Price List not asked). (``currency=`` and
        ``use_pricing_api=`` still work for one release, with a warning.)
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
    #: The task state store's key of the job's reference (Airflow 3.3+, :mod:`~airflow_hetero.operators.durable`);
    #: renaming it breaks the retries of tasks in flight.
    external_id_key = "airflow_hetero_job"

    def __init__(
        self,
        *,
        job: HeteroTrainingJob | Mapping[str, Any] | str | os.PathLike[str] | None = None,
        request: Mapping[str, Any] | str | os.PathLike[str] | None = None,
        job_name: str | None = None,
        capacity: CapacityFallback | Mapping[str, Any] | None = None,
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
        on_existing_job: OnExistingJob | None = None,
        durable: bool | None = None,
        model_asset: Asset | str | None = None,
        prices: Mapping[str, float] | PriceSettings | None = None,
        max_cost: float | str | None = None,
        rightsizing: Any = None,
        batch_queue: str | BatchQueue | None = None,
        **kwargs: Any,
    ) -> None:
        if model_asset is not None and not wait_for_completion:
            raise ValueError("model_asset needs wait_for_completion=True (or set it on the sensor that waits)")
        fallback_instance_types, capacity_attempts, capacity_retry_delay = _capacity_of(capacity, kwargs)
        self.set_prices(prices, kwargs)  # a bad price fails the parse
        super().__init__(**kwargs)
        self.set_aws_settings(aws_conn_id, region_name, verify, botocore_config)
        self.model_asset: Asset | None = None
        if model_asset is not None:
            from airflow_hetero.lineage.outputs import declare_model_asset

            self.model_asset = declare_model_asset(self, model_asset)
        #: The result dict of the job this task saw finish or fail (the lineage listener reads it), and its cost.
        self.job_result: dict[str, Any] | None = None
        self.job_cost: BilledCost | None = None
        self.durable, self.on_existing_job = durability(durable, on_existing_job)  # after the mixin's __init__
        if check_interval <= 0:
            raise ValueError(f"check_interval must be positive, got {check_interval}")
        if (job is None) == (request is None):
            given = "both" if job is not None else "neither"
            raise ValueError(f"give job= (a definition) or request= (a CreateTrainingJob request), not {given}")
        fallbacks = fallback_instance_types  # checked with the job or request it belongs to
        self.job: Mapping[str, Any] | str | None = check_at_parse(
            job, request=False, fallbacks=fallbacks if job is not None else None
        )
        self.request: Mapping[str, Any] | str | None = check_at_parse(
            request, request=True, fallbacks=fallbacks if request is not None else None
        )
        self.fallback_instance_types = fallback_instance_types
        self.rightsizing_source = self.job if self.job is not None else self.request  # as written: its fingerprint
        self.rightsizing: dict[str, Any] | None = None
        if rightsizing is not None:  # checked now, against the job when both are plain data
            from airflow_hetero.operators.rightsizing_steps import check_rightsizing

            self.rightsizing = check_rightsizing(
                rightsizing, self.rightsizing_source, request=request is not None, fallbacks=fallback_instance_types
            )
        self.job_name = job_name
        self.wait_for_completion = wait_for_completion
        self.deferrable_given = deferrable  # None: Airflow's default, read when the task runs
        self.check_interval = check_interval
        self.max_ingestion_time = max_ingestion_time
        self.print_log = print_log
        self.fail_on_stopped = fail_on_stopped
        self.capacity_attempts = capacity_attempts
        self.capacity_retry_delay = capacity_retry_delay
        if isinstance(max_cost, int | float) and not max_cost > 0:  # a template is checked once rendered
            raise ValueError(f"max_cost must be a positive number, got {max_cost!r}")
        self.max_cost = max_cost
        self.batch_queue: BatchQueue | None = None
        if batch_queue is not None:
            from airflow_hetero.operators.queue_mode import check_batch_queue

            self.batch_queue = check_batch_queue(batch_queue, fallback_instance_types, self.job, job_name)
        self.run: TrainingRun | None = None  # this task run's state (on_kill reads it)

    @property
    def deferrable(self) -> bool:
        """Wait in the triggerer: ``deferrable=`` as given, else Airflow's ``[operators] default_deferrable``,
        read when the task runs (a DAG parse has no use for it)."""
        return default_deferrable() if self.deferrable_given is None else self.deferrable_given

    @deferrable.setter
    def deferrable(self, value: bool | None) -> None:
        self.deferrable_given = value

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

    @property
    def summary_candidates(self) -> list[str]:
        """The DAG's tasks summarising this one (their ``training_task_id``): right-sizing reads their records."""
        dag = self.dag if self.has_dag() else None  # type: ignore[no-untyped-call]
        return [t.task_id for t in getattr(dag, "tasks", []) if getattr(t, "training_task_id", None) == self.task_id]

    # -- running: a run per execute (or resume), handed to the part that runs it ----------------

    @cached_property
    def hook(self) -> HeteroTrainingHook:
        """The task run's SageMaker hook, built once (as the Amazon provider's operators cache theirs)."""
        return self.make_hook()

    def new_run(self, context: Context) -> TrainingRun:
        """This task run's state (``on_kill`` reads it)."""
        from airflow_hetero.operators.run_state import TrainingRun

        self.run = TrainingRun(context=context, hook=self.hook)
        return self.run

    def recorded(self, context: Context, outcome: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """``outcome()`` (``execute`` or a resume), its job kept for the lineage listener and the model asset."""
        from airflow_hetero.lineage.outputs import recorded

        result: dict[str, Any] = recorded(self, context, outcome)
        return result

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage[Any, Any] | None:
        """Inputs: every S3 channel with its instance groups; output: the model artifact (a MODEL); the run facets
        naming the job (ARN, engine, identity tags, instance groups and cost) and its job type (docs/lineage.md)."""
        from airflow_hetero.lineage.outputs import lineage_on_complete

        return lineage_on_complete(self, task_instance)

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> OperatorLineage[Any, Any] | None:
        """The same facets for a job that failed (no model output); None when the task saw no job end."""
        from airflow_hetero.lineage.outputs import lineage_on_failure

        return lineage_on_failure(self, task_instance)

    def execute(self, context: Context) -> dict[str, Any]:
        """Submit or re-attach (the task state store first, Airflow 3.3+), then wait (or defer); the result dict."""
        from airflow_hetero.operators.job_store import result_of, resumable_context

        run = self.new_run(context)

        def resumed() -> dict[str, Any]:
            if context.get("task_state_store") is None:  # outside a task runner (a script, a test): none to resume
                self.durable_run().without_store()
            else:
                self.execute_resumable(resumable_context(self, context))
            return result_of(run)

        return self.recorded(context, resumed)

    # -- ResumableJobMixin: each method's body is operators/durable.py's -------------------------

    def durable_run(self) -> DurableRun:
        """This run's :class:`~airflow_hetero.operators.durable.DurableRun`."""
        from airflow_hetero.operators.durable import DurableRun

        if self.run is None:
            raise RuntimeError("the mixin's methods run inside execute")
        return DurableRun(self, self.run)

    def submit_job(self, context: Context) -> JsonValue:
        """The walk of the task instance's names: re-attach to its job or submit one; the job's reference."""
        return self.durable_run().submit()

    def get_job_status(self, external_id: JsonValue, context: Context) -> str:
        """The stored job's status (one describe), or why it cannot be re-attached."""
        return self.durable_run().status(external_id)

    def is_job_active(self, status: str) -> bool:
        from airflow_hetero.operators.job_store import ACTIVE

        return status in ACTIVE

    def is_job_succeeded(self, status: str) -> bool:
        from airflow_hetero.operators.job_store import SUCCEEDED

        return status in SUCCEEDED

    def poll_until_complete(self, external_id: JsonValue, context: Context) -> None:
        """Wait for the job (or defer); the result is kept for ``execute``."""
        self.durable_run().poll(external_id)

    def get_job_result(self, external_id: JsonValue, context: Context) -> dict[str, Any]:
        return self.durable_run().result(external_id)

    def execute_complete(
        self, context: Context, event: dict[str, Any], capacity: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Resume after deferral: same outcome rules and XCom as the synchronous wait. ``capacity``: a job
        with fallbacks' attempts so far and the task's start; a capacity failure submits the next cluster
        and defers again (:class:`~airflow_hetero.operators.deferred_wait.DeferredWait`)."""
        from airflow_hetero.operators.deferred_wait import DeferredWait
        from airflow_hetero.operators.rightsizing_steps import restore_decision

        run = self.new_run(context)
        restore_decision(self, run)
        return self.recorded(context, lambda: DeferredWait(self, run).resume(event, capacity))

    def execute_queued_complete(
        self, context: Context, event: dict[str, Any], service_job_id: str | None = None, stage: str = "queue"
    ) -> dict[str, Any]:
        """Resume after a deferral of queue mode (the queue's trigger or the attempt's training-job trigger)."""
        from airflow_hetero.operators.queue_steps import QueueRun
        from airflow_hetero.operators.rightsizing_steps import restore_decision

        job_id = service_job_id or str(event.get("service_job_id"))  # dag.test() resumes without the kwargs
        run = self.new_run(context)
        restore_decision(self, run)
        stage = str(event.get("stage") or stage)
        return self.recorded(context, lambda: QueueRun(self, run).resume(event, job_id, stage))

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
            from airflow_hetero.operators.queue_steps import QueueRun

            try:
                return QueueRun(self, self.new_run(context)).terminate_own("The Airflow task ended")
            except AirflowFailException:
                return None
        job = self.load_definition(context)
        hook = self.hook
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
        run = self.run
        if run is None:
            return
        if run.service_job_id:
            job_id = run.service_job_id
            (run.batch_hook or self.make_batch_hook()).terminate_service_job(job_id, "The Airflow task was killed")
            self.log.info("Task killed: asked service job %s to terminate (it stops its training job)", job_id)
            return
        name = run.active_job_name
        if name:
            run.hook.stop_training_job(name)
            self.log.info("Task killed: asked training job %s to stop", name)
