"""``LocalEndpoint``: the offline SageMaker endpoint as a threaded HTTP server on loopback.

One URL serves the training-job actions (run for real, as local processes) and, through moto,
S3, CloudWatch Logs, CloudWatch, IAM and STS. Use it as a context manager in tests or scripts::

    with LocalEndpoint() as ep:
        sm = ep.client("sagemaker")
        ...

moto keeps its data (buckets, log streams, metrics) in the memory of the process that serves it,
shared by every endpoint in that process; job records live in ``workdir`` and survive restarts.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlencode

from airflow_hetero.local.api.errors import ServiceError
from airflow_hetero.local.api.flat_options import from_flat_keywords
from airflow_hetero.local.batch.options import BatchOptions
from airflow_hetero.local.batch.setup import check_queues
from airflow_hetero.local.training.capacity import CapacityLedger, Limits
from airflow_hetero.local.training.clients import DEFAULT_REGION, FAKE_ACCESS_KEY, FAKE_SECRET_KEY, make_client
from airflow_hetero.local.training.options import RunOptions
from airflow_hetero.local.training.spot import SpotOptions

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
#: Seconds :meth:`LocalEndpoint.stop` waits for the serving thread once the jobs have ended.
SERVER_STOP_TIMEOUT = 5.0


def needs_local_extra(err: ImportError) -> str:
    """The one line that says the endpoint needs the package's ``local`` extra, and how to get it."""
    return f"the offline endpoint needs the 'local' extra ({err}): pip install 'airflow-hetero[local]'"


class LocalEndpoint:
    """Offline SageMaker training endpoint (plus moto services) on one local URL.

    ``workdir`` holds job records and host directories (a temporary directory, deleted on stop,
    when None); ``port`` 0 picks a free port; ``host`` is the bind address (loopback unless given);
    ``seed`` makes the host-to-group shuffle repeatable, and the random spot interruptions.
    ``run`` (:class:`~airflow_hetero.local.training.options.RunOptions`): the timing in seconds
    (``stop_grace`` SIGTERM->SIGKILL grace, ``metrics_interval`` metric sampling, ``log_flush_interval``
    log batching) and the limits: ``max_request_bytes`` per request body (413 beyond), ``max_hosts``
    running at once (``ResourceLimitExceeded`` beyond), ``max_source_bytes`` extracted per source tarball
    and ``max_channel_bytes`` downloaded per channel and host (the job fails beyond).
    ``capacity`` and ``quota`` (instance type -> count; a type not named is unlimited): instances
    that can run at once (a job beyond fails with SageMaker's ``CapacityError``) and the account quota
    (a create beyond answers ``ResourceLimitExceeded``); change them while it runs with
    :meth:`set_capacity` / :meth:`set_quota` (another process: :func:`~.control.change_capacity`).
    ``batch_queues`` (queue name -> instances): an AWS Batch service environment ``NAME-env`` of that
    many instances and a SAGEMAKER_TRAINING job queue ``NAME`` over it, for service jobs
    (:mod:`airflow_hetero.local.batch`; any client may create more; a ``ValueError`` here for a queue
    Batch would refuse); ``batch`` (:class:`~airflow_hetero.local.batch.options.BatchOptions`): the
    seconds a job requeued after a CapacityError waits and how often the queue looks at its training jobs.
    ``spot`` (:class:`~airflow_hetero.local.training.spot.SpotOptions`, or ``run.spot``): managed spot
    jobs (``EnableManagedSpotTraining``) are interrupted on demand (:meth:`interrupt`; another process:
    :func:`~.spot_control.interrupt_job`), after ``interrupt_after`` seconds of training (one entry per
    run), and at random with ``interrupt_probability`` every ``interrupt_interval`` seconds of training
    (seeded by ``seed`` and the job's name); an interrupted job waits ``restart_delay`` seconds, then
    restarts every host. ``saving`` is the stand-in discount of their BillableTimeInSeconds (not a price:
    :data:`~airflow_hetero.sagemaker_facts.STAND_IN_SPOT_SAVING` unless told); each host's
    ``CheckpointConfig.LocalPath`` is copied to ``S3Uri`` every ``checkpoint_sync_interval`` seconds.
    Every default is its option class's. The flat keywords of earlier releases (``stop_grace=``,
    ``spot_restart_delay=``, ``batch_requeue_delay=``...) still work for this release, with a
    ``DeprecationWarning`` that says what to write instead.
    Requests from web pages and for other ``Host`` names are refused (see
    :class:`airflow_hetero.local.api.app.RequestGuard`).
    """

    def __init__(
        self,
        workdir: str | Path | None = None,
        port: int = 0,
        host: str = LOOPBACK,
        seed: int = 0,
        *,
        run: RunOptions | None = None,
        spot: SpotOptions | None = None,
        batch: BatchOptions | None = None,
        capacity: Limits | None = None,
        quota: Limits | None = None,
        batch_queues: Mapping[str, int] | None = None,
        **flat: Any,
    ) -> None:
        if flat:  # ValueError here when one is out of range, TypeError for a name never known
            run, spot, batch = from_flat_keywords(flat, run, spot, batch)
        run = run or RunOptions()
        if spot is not None and run.spot != SpotOptions():
            raise ValueError("give the spot options once: spot=SpotOptions(...) or run=RunOptions(spot=...)")
        self._workdir_arg = Path(workdir) if workdir is not None else None
        self._port = port
        self.host = host
        self.seed = seed
        self.region = DEFAULT_REGION
        self.options = replace(run, spot=replace(spot or run.spot, seed=seed))
        """The timing and limits in use (``spot.seed`` is the endpoint's ``seed``)."""
        self.capacity = CapacityLedger(capacity=capacity, quota=quota)
        """Instances of each type that can run at once and the account quota (ValueError above when bad)."""
        self.batch_queues = dict(batch_queues or {})
        check_queues(self.batch_queues)  # ValueError before anything is made, as Batch would refuse them
        self.batch_options = batch or BatchOptions()
        """The offline queue's timing."""
        self._workdir: Path | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.service: Any = None
        self.batch: Any = None
        """The offline queue (:class:`~airflow_hetero.local.batch.backend.BatchBackend`) once started."""
        self.batch_setup: list[str] = []
        self._batch_api: Any = None
        """What ``batch_queues`` made, one line each."""

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> LocalEndpoint:
        """Bind, start serving in a background thread, and return self."""
        if self._server is not None:
            return self
        try:
            from werkzeug.serving import make_server

            from airflow_hetero.local.api.app import BodyLimit, EndpointApp, RequestGuard, moto_app
            from airflow_hetero.local.api.batch_bridge import ServiceTrainingJobs, ensure_queues
            from airflow_hetero.local.api.service import TrainingService
            from airflow_hetero.local.batch.backend import BatchBackend
            from airflow_hetero.local.batch.responses import BatchResponses

            fallback = moto_app()
        except ImportError as exc:
            raise RuntimeError(needs_local_extra(exc)) from exc

        if self._workdir_arg is None:
            self._workdir = Path(tempfile.mkdtemp(prefix="airflow-hetero-local-"))
        else:
            self._workdir = self._workdir_arg
            self._workdir.mkdir(parents=True, exist_ok=True)
        self.service = TrainingService(self._workdir, seed=self.seed, options=self.options, capacity=self.capacity)
        self.batch = BatchBackend(self._workdir, ServiceTrainingJobs(self.service), self.batch_options)
        self.batch_setup = ensure_queues(self.batch, self.batch_queues, self.region)
        self._batch_api = BatchResponses(self.batch)
        endpoint_app = EndpointApp(self.service, fallback, self._batch_api)
        app = RequestGuard(BodyLimit(endpoint_app, self.options.max_request_bytes), self.host)
        self._server = make_server(self.host, self._port, app, threaded=True, request_handler=_QuietHandler())
        app.bind(self.port)
        self.service.attach(self.url)
        self.batch.start()
        self._thread = threading.Thread(target=self._server.serve_forever, name="local-endpoint", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """End running jobs (Failed, hosts terminated), stop serving, remove a temporary workdir.

        Bounded: the queue thread's stop (``STOP_TIMEOUT`` of :mod:`..batch.backend`), the service's
        shutdown (``stop_grace`` plus its margin), then at most ``SERVER_STOP_TIMEOUT`` seconds for the
        server thread; nothing here waits without a timeout, and a bound that passes is logged.
        """
        if self._server is None:
            return
        try:
            self.batch.stop()  # no attempt starts while the training jobs are ended
            self.service.shutdown()
        finally:
            server, self._server = self._server, None
            # shutdown() waits for serve_forever to notice (it polls every 0.5 s), with no timeout of
            # its own: ask from a helper thread and wait for the serving thread with one.
            threading.Thread(target=server.shutdown, name="local-endpoint-stop", daemon=True).start()
            thread, self._thread = self._thread, None
            if thread is not None:
                thread.join(SERVER_STOP_TIMEOUT)
                if thread.is_alive():
                    log.warning(
                        "the endpoint's serving thread did not end within %.1f s of the stop; closing its socket",
                        SERVER_STOP_TIMEOUT,
                    )
            server.server_close()  # request threads are daemons: this joins none of them
        if self._workdir_arg is None and self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)

    def __enter__(self) -> LocalEndpoint:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- capacity ------------------------------------------------------------------------------
    def set_capacity(self, capacity: Limits) -> dict[str, dict[str, int]]:
        """Instances of the types named that can run at once from now on (None: unlimited); the new
        :meth:`capacity_state`. Running jobs keep theirs; a job already failed stays failed."""
        self.capacity.change(capacity=capacity)
        return self.capacity.state()

    def set_quota(self, quota: Limits) -> dict[str, dict[str, int]]:
        """The account quota of the types named from now on (None: unlimited); the new :meth:`capacity_state`."""
        self.capacity.change(quota=quota)
        return self.capacity.state()

    def capacity_state(self) -> dict[str, dict[str, int]]:
        """``capacity``, ``quota`` (the types limited), ``running`` and ``utilization`` (instances in use
        against each)."""
        return self.capacity.state()

    def batch_calls(self) -> dict[str, int]:
        """Batch API requests answered so far, by operation (``ListServiceJobs``: 3); refused ones count."""
        if self._batch_api is None:
            raise RuntimeError("LocalEndpoint is not started")
        return dict(self._batch_api.call_counts())

    # -- spot ----------------------------------------------------------------------------------
    def interrupt(self, job_name: str) -> dict[str, Any]:
        """Interrupt running spot job ``job_name`` now, as EC2 taking its capacity back: every host is
        stopped, the job goes Interrupted, then restarts. ``{"TrainingJobName", "SecondaryStatus"}`` (the
        status it had); ``ValueError`` when the job is unknown, not managed spot or not InProgress."""
        if self.service is None:
            raise RuntimeError("LocalEndpoint is not started")
        try:
            answered: dict[str, Any] = self.service.interrupt(job_name)
        except ServiceError as err:
            raise ValueError(err.message) from None
        return answered

    # -- addresses -----------------------------------------------------------------------------
    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        if self._server is None:
            raise RuntimeError("LocalEndpoint is not started")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (the loopback address when bound to all interfaces)."""
        host = LOOPBACK if self.host in ("", "0.0.0.0") else self.host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    @property
    def workdir(self) -> Path:
        """Where job records, host directories and host logs live."""
        if self._workdir is None:
            raise RuntimeError("LocalEndpoint is not started")
        return self._workdir

    def job_dir(self, job_name: str) -> Path:
        """A job's directory: ``job.json``, ``hosts.json``, ``hosts/algo-N/`` (/opt/ml trees), ``logs/``."""
        return self.workdir / "jobs" / job_name.lower()

    # -- clients and connections ---------------------------------------------------------------
    def client(self, service: str) -> Any:
        """A boto3 client for ``service`` against this endpoint (fake credentials, us-east-1)."""
        return make_client(service, self.url, self.region)

    def connection_extra(self) -> dict[str, str]:
        """The Airflow AWS connection extra that points the Amazon provider here."""
        return {"endpoint_url": self.url, "region_name": self.region}

    def airflow_connection_json(self) -> str:
        """The connection in Airflow's JSON form (for ``AIRFLOW_CONN_<ID>``)."""
        return json.dumps(
            {
                "conn_type": "aws",
                "login": FAKE_ACCESS_KEY,
                "password": FAKE_SECRET_KEY,
                "extra": self.connection_extra(),
            }
        )

    def airflow_connection_uri(self, conn_id: str = "aws_default") -> str:
        """The connection as an Airflow URI (``aws://testing:testing@/?endpoint_url=...``).

        ``conn_id`` is accepted for symmetry with :meth:`environ`; a URI does not carry the id.
        """
        del conn_id
        return f"aws://{FAKE_ACCESS_KEY}:{FAKE_SECRET_KEY}@/?{urlencode(self.connection_extra())}"

    def environ(self, conn_id: str = "aws_default") -> dict[str, str]:
        """Environment variables for a process that should use this endpoint: the Airflow connection
        ``AIRFLOW_CONN_<CONN_ID>`` plus fake AWS credentials, region and ``AWS_ENDPOINT_URL``."""
        return {
            f"AIRFLOW_CONN_{conn_id.upper()}": self.airflow_connection_json(),
            "AWS_ACCESS_KEY_ID": FAKE_ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": FAKE_SECRET_KEY,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_ENDPOINT_URL": self.url,
        }


def _QuietHandler() -> Any:
    from moto.moto_server.werkzeug_app import MotoRequestHandler

    class QuietHandler(MotoRequestHandler):
        """moto's request handler without a log line per request."""

        def log_request(self, code: Any = "-", size: Any = "-") -> None:
            return None

    return QuietHandler
