"""HeteroTrainingOperator: submit a (heterogeneous) SageMaker training job once, wait, fail clearly.

* ``job`` is a :class:`~airflow_hetero.definition.job.HeteroTrainingJob`, a dict, or a YAML/JSON file path
  relative to the DAG file. Every string in it may use Jinja. It is rendered with the other template
  fields (a file becomes its rendered dict, so Rendered Templates shows the final definition) and
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

Importing this module loads nothing beyond ``airflow.sdk``, the extra links and the lineage mixin:
the methods that run the task are thin, their code lives in :mod:`~airflow_hetero.operators.running`
and :mod:`~airflow_hetero.operators.lifecycle`, which load (with the definition, boto3 and the
Amazon provider) when the task runs. A DAG file pays for the class, its arguments and the
parse-time check of the definition (:mod:`~airflow_hetero.definition.validated`), nothing else.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from airflow_hetero._compat import AirflowFailException, BaseOperator, default_deferrable
from airflow_hetero.lineage.mixin import JobOutputsMixin, records_outputs
from airflow_hetero.links.training import SageMakerTrainingJobLink, TrainingJobLogsLink

if TYPE_CHECKING:
    import jinja2

    from airflow_hetero._compat import Asset, Context
    from airflow_hetero.definition.job import HeteroTrainingJob
    from airflow_hetero.hooks.training import HeteroTrainingHook
    from airflow_hetero.job.identity import TaskIdentity
    from airflow_hetero.logs.tail import LogTailer

#: A string at run time: subscripting ``Literal`` costs a parse measurably, and only type checkers read it.
OnExistingJob: TypeAlias = 'Literal["reattach", "fail", "new"]'
_ON_EXISTING = ("reattach", "fail", "new")


class HeteroTrainingOperator(JobOutputsMixin, BaseOperator):
    """Run one SageMaker training job (heterogeneous or not) and return a plain result dict.

    :param job: the definition: a ``HeteroTrainingJob``, a dict, or a YAML/JSON path (relative
        paths resolve against the DAG file's folder). Templated, strings at any depth.
    :param job_name: explicit job name (templated); default: derived per task instance.
    :param aws_conn_id: Airflow AWS connection (``endpoint_url`` in its extra is honoured).
    :param region_name: overrides the connection's region.
    :param verify: TLS certificate verification for AWS calls (False, or a CA bundle path).
    :param botocore_config: ``botocore.config.Config`` options as a dict (retries, timeouts, proxies).
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
        instance groups and final metrics. Needs ``wait_for_completion``.
    """

    #: How long polls may keep failing transiently (each after its own retries) before the task
    #: fails; its retry then re-attaches to the still-running job.
    transient_grace_seconds: float = 1800
    #: "Not found" from DescribeTrainingJob this soon after our own create is eventual consistency.
    not_found_grace_seconds: float = 60
    #: A job staying Stopping longer than this fails the task (with its name and state).
    stopping_timeout_seconds: float = 1800

    template_fields: Sequence[str] = ("job", "job_name", "aws_conn_id", "region_name", "verify")
    template_fields_renderers = {"job": "json"}
    operator_extra_links = (SageMakerTrainingJobLink(), TrainingJobLogsLink())
    ui_color = "#ede4ff"

    def __init__(
        self,
        *,
        job: HeteroTrainingJob | Mapping[str, Any] | str | os.PathLike[str],
        job_name: str | None = None,
        aws_conn_id: str | None = "aws_default",
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
        model_asset: Asset | str | None = None,
        **kwargs: Any,
    ) -> None:
        if model_asset is not None and not wait_for_completion:
            raise ValueError("model_asset needs wait_for_completion=True (or set it on the sensor that waits)")
        super().__init__(**kwargs)
        self.model_asset = self.declare_model_asset(model_asset)
        if on_existing_job not in _ON_EXISTING:
            raise ValueError(f"on_existing_job must be one of {_ON_EXISTING}, got {on_existing_job!r}")
        if check_interval <= 0:
            raise ValueError(f"check_interval must be positive, got {check_interval}")
        if hasattr(job, "model_dump"):  # a HeteroTrainingJob: a plain dict renders at any depth
            job = job.model_dump(mode="json", exclude_unset=True)
        elif not isinstance(job, dict) and isinstance(job, os.PathLike):  # a dict first: the ABC check is slow
            job = os.fspath(job)
        if isinstance(job, Mapping) and not _has_template(job):
            from airflow_hetero.definition.validated import validate_once

            validate_once(job)  # nothing to render: a bad definition fails now, at DAG-parse time
        self.job: Mapping[str, Any] | str = job
        self.job_name = job_name
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self.verify = verify
        self.botocore_config = botocore_config
        self.wait_for_completion = wait_for_completion
        self.deferrable = default_deferrable() if deferrable is None else deferrable
        self.check_interval = check_interval
        self.max_ingestion_time = max_ingestion_time
        self.print_log = print_log
        self.fail_on_stopped = fail_on_stopped
        self.on_existing_job = on_existing_job
        self.active_job_name: str | None = None  # the job on_kill stops
        self.submitted_at: float | None = None  # epoch of our own CreateTrainingJob (not-found grace)
        self.wait_limit: float | None = None  # the submitted job's MaxRuntime (+ MaxWait) + margin

    # -- pieces ------------------------------------------------------------------------------

    def make_hook(self) -> HeteroTrainingHook:
        """The AWS hook for this task's connection and region."""
        from airflow_hetero.hooks.training import HeteroTrainingHook

        return HeteroTrainingHook.for_task(self)

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
        except jinja2.TemplateError as err:
            raise AirflowFailException(f"Task {self.task_id}: template error: {type(err).__name__}: {err}") from err
        self.load_definition(context)  # invalid after rendering: fail now, before any AWS call

    # -- running the task: thin methods, their code loads with the first call ----------------

    def render_definition_file(
        self, path: str, context: Context, jinja_env: jinja2.Environment | None = None
    ) -> dict[str, Any]:
        """Read a YAML/JSON definition (relative to the DAG folder) and render Jinja in every string."""
        from airflow_hetero.operators import running

        return running.render_definition_file(self, path, context, jinja_env)

    def load_definition(self, context: Context) -> HeteroTrainingJob:
        """The rendered definition, validated; definition errors fail without retries."""
        from airflow_hetero.operators import running

        return running.load_definition(self, context)

    def candidate_names(self, job: HeteroTrainingJob, context: Context) -> Iterator[str]:
        """Job names this task instance may use, in order: first try, then fresh suffixes."""
        from airflow_hetero.operators import running

        return running.candidate_names(self, job, context)

    def submit(
        self, hook: HeteroTrainingHook, job: HeteroTrainingJob, name: str, region: str, identity: TaskIdentity
    ) -> None:
        """Package and upload a local source_dir, then send the one CreateTrainingJob (identity stamped)."""
        from airflow_hetero.operators import running

        running.submit(self, hook, job, name=name, region=region, identity=identity)

    def start_job(
        self, hook: HeteroTrainingHook, job: HeteroTrainingJob, context: Context, region: str
    ) -> tuple[str, dict[str, Any] | None]:
        """Re-attach to this task instance's job or submit a new one; its name and description (None: new)."""
        from airflow_hetero.operators import lifecycle

        return lifecycle.start_job(self, hook, job, context, region)

    @records_outputs
    def execute(self, context: Context) -> dict[str, Any]:
        """Submit or re-attach, then wait (or defer) and return the result dict."""
        from airflow_hetero.operators import running

        return running.execute(self, context)

    def defer_wait(self, name: str, started_at: float | None = None) -> None:
        """Hand the wait to the triggerer (deadlines counted from the task's start, see deferral_deadline)."""
        from airflow_hetero.operators import running

        running.defer_wait(self, name, started_at)

    def wait(
        self, hook: HeteroTrainingHook, name: str, describe: dict[str, Any] | None, started: float
    ) -> dict[str, Any]:
        """Synchronous wait: one DescribeTrainingJob per check_interval until the job finishes."""
        from airflow_hetero.operators import running

        return running.wait(self, hook, name, describe, started)

    def wait_stopped(self, hook: HeteroTrainingHook, name: str) -> dict[str, Any]:
        """Wait (bounded) for a Stopping job to end; its last description."""
        from airflow_hetero.operators import lifecycle

        return lifecycle.wait_stopped(self, hook, name)

    def deferral_deadline(self, started_at: float) -> tuple[float | None, str | None, float | None]:
        """(trigger deadline, what it is, Airflow's own deferral timeout in seconds), from the task's start."""
        from airflow_hetero.operators import lifecycle

        return lifecycle.deferral_deadline(self, started_at)

    def describe_fresh(self, hook: HeteroTrainingHook, name: str) -> dict[str, Any]:
        """DescribeTrainingJob, waiting out "not found" within the grace period after our own create."""
        from airflow_hetero.operators import lifecycle

        return lifecycle.describe_fresh(self, hook, name)

    def just_created(self) -> bool:
        """True within ``not_found_grace_seconds`` of this task's own CreateTrainingJob."""
        from airflow_hetero.operators import lifecycle

        return lifecycle.just_created(self)

    def log_transitions(self, name: str, describe: dict[str, Any], logged: int) -> int:
        """Write each new SecondaryStatus transition once, with its StatusMessage."""
        from airflow_hetero.operators import running

        return running.log_transitions(self, name, describe, logged)

    def make_tailer(self, hook: HeteroTrainingHook, name: str, describe: dict[str, Any]) -> LogTailer:
        """A log follower for every host of the job, prefixing lines with ``[group/host]``."""
        from airflow_hetero.operators import running

        return running.make_tailer(self, hook, name, describe)

    def follow_logs(self, tailer: LogTailer, *, final: bool, rescan: bool = False) -> LogTailer | None:
        """Print new log lines; logs are a convenience, so a persistent error only stops them."""
        from airflow_hetero.operators import running

        return running.follow_logs(self, tailer, final=final, rescan=rescan)

    @records_outputs
    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """Resume after deferral: same outcome rules and XCom as the synchronous wait."""
        from airflow_hetero.operators import running

        return running.execute_complete(self, context, event)

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
        from airflow_hetero.operators import lifecycle

        return lifecycle.stop_own_job(self, context)

    def on_kill(self) -> None:
        """Stop the job this task started or re-attached to (a killed task must not leave it running)."""
        name = self.active_job_name
        if not name:
            return
        self.log.info("Task killed: stopping training job %s", name)
        self.make_hook().stop_training_job(name)


def _has_template(value: Any) -> bool:
    """True when any string inside ``value`` holds Jinja (then validation waits for rendering)."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if value is None or isinstance(value, int | float):  # before the Mapping ABC check, which is slow
        return False
    if isinstance(value, list | tuple):
        return any(_has_template(v) for v in value)
    if isinstance(value, Mapping):
        return any(_has_template(k) or _has_template(v) for k, v in value.items())
    return False
