"""Run one training job: its lifecycle from Downloading to a terminal state, hosts included.

First the job's instances are launched (:class:`CapacityLedger`): when they do not fit the capacity
left, the job goes Starting -> Failed with SageMaker's ``CapacityError`` reason, no host started,
nothing billed. Then InProgress with SecondaryStatus Starting -> Downloading -> Training -> Uploading -> Completed, each
transition recorded with SageMaker's status message. A host exiting non-zero fails the job (the
others are terminated); StopTrainingJob and MaxRuntimeInSeconds terminate every host (SIGTERM to
each host's group and tree, then, after one shared grace period, its whole tree is killed) and end
the job Stopped. A host whose output cannot be recorded (full disk) fails the job. Each output line
also feeds the job's metric definitions (:mod:`.training_metrics`). The hosts' model directories are
merged into ``<S3OutputPath>/<job>/output/model.tar.gz``.

A managed spot job (:mod:`.spot`) may be interrupted while it trains: every host is terminated, the
job goes Interrupted, waits ``restart_delay``, then Restarting -> Starting -> Downloading -> Training
again on fresh host folders, its checkpoints (:mod:`.checkpoints`) restored on every host;
MaxRuntimeInSeconds counts the training time only, MaxWaitTimeInSeconds the wall time since the job
was created (Stopped, ``MaxWaitTimeExceeded``, beyond it).
"""

from __future__ import annotations

import functools
import logging
import shutil
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from airflow_hetero.local.host.launch import install_resolver
from airflow_hetero.local.host.process import (
    KILL_WAIT,
    EndedProcess,
    HostProcess,
    host_mark,
    kill_tree,
    opt_ml_problem,
    wait_gone,
)
from airflow_hetero.local.training.capacity import CapacityLedger, CapacityShortage
from airflow_hetero.local.training.checkpoints import CheckpointSync
from airflow_hetero.local.training.clients import Clients
from airflow_hetero.local.training.hostspec import host_spec
from airflow_hetero.local.training.layout import Cluster, Host
from airflow_hetero.local.training.logship import LogShipper, stream_name
from airflow_hetero.local.training.options import RunOptions
from airflow_hetero.local.training.prepare import EntryPoint, JobFailure, prepare_hosts
from airflow_hetero.local.training.spot import SpotInterruption, SpotSchedule
from airflow_hetero.local.training.store import JobStore, add_transition, finish
from airflow_hetero.local.training.training_metrics import MetricMatcher
from airflow_hetero.local.training.transfer import has_files, join_uri, tar_directories, upload
from airflow_hetero.local.training.utilisation import MetricsSampler
from airflow_hetero.sagemaker_facts import (
    CAPACITY_ERROR_REASON,
    DEFAULT_MAX_RUNTIME_SECONDS,
    LAUNCHING_INSTANCES_MESSAGE,
    MAX_WAIT_EXCEEDED_MESSAGE,
    RESTARTING_MESSAGE,
    SPOT_INTERRUPTED_MESSAGE,
)

log = logging.getLogger(__name__)

MAX_FAILURE_REASON = 1024
#: The Starting message SageMaker shows while it cannot get a job's instances (botocore's documented one).
INSUFFICIENT_CAPACITY_MESSAGE = "Insufficient capacity error from EC2 while launching instances, retrying!"


class _Interrupted(Exception):
    def __init__(self, kind: str, reason: str = "") -> None:
        super().__init__(kind)
        self.kind = kind
        self.reason = reason


def failure_reason(host: Host, code: int, lines: list[str]) -> str:
    """FailureReason naming host, group and exit code, ending with the host's last error lines."""
    if code < 0:
        try:
            how = f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            how = f"was killed by signal {-code}"
    else:
        how = f"exited with code {code}"
    head = f"AlgorithmError: host {host.name} (instance group {host.group}) {how}. Last error lines:\n"
    detail = "\n".join(lines).strip() or "(no output)"
    room = MAX_FAILURE_REASON - len(head)
    if len(detail) > room:
        detail = "..." + detail[-(room - 3) :]
    return head + detail


class JobRunner:
    """Drives one job in a background thread; ``request_stop``/``abort`` end it early.

    ``on_hosts_ended(name)`` is called once the hosts are terminated, before the job's ending is
    recorded (a client that sees the job ended may use its hosts at once); ``on_done(name)`` when the
    thread ends.
    """

    def __init__(
        self,
        *,
        name: str,
        store: JobStore,
        clients: Clients,
        region: str,
        cluster: Cluster,
        options: RunOptions,
        on_done: Callable[[str], None],
        on_hosts_ended: Callable[[str], None],
        capacity: CapacityLedger | None = None,
    ) -> None:
        self.name = name
        self._capacity = capacity if capacity is not None else CapacityLedger()
        self._store = store
        self._clients = clients
        self._region = region
        self._cluster = cluster
        self._options = options
        self._on_done = on_done
        self._on_hosts_ended = on_hosts_ended
        self._stop = threading.Event()
        self._abort_reason: str | None = None
        self._deadline = float("inf")
        self._wait_deadline = float("inf")
        self._procs: dict[str, HostProcess] = {}
        self._streams: dict[str, str] = {}
        self._checkpoints: CheckpointSync | None = None
        record = store.get(name) or {}
        self.spot = SpotSchedule(options.spot, name) if record.get("EnableManagedSpotTraining") is True else None
        """When this job is interrupted (None: not a spot job)."""
        self._resolver_dir = store.job_dir(name) / "python"
        self._thread = threading.Thread(target=self._run, name=f"job-{name}", daemon=True)

    def start(self) -> None:
        """Start running the job."""
        self._thread.start()

    def request_stop(self) -> None:
        """StopTrainingJob: terminate the hosts and end the job Stopped."""
        self._stop.set()

    def abort(self, reason: str) -> None:
        """End the job Failed with ``reason`` (the endpoint is shutting down)."""
        self._abort_reason = reason
        self._stop.set()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the job thread to finish."""
        self._thread.join(timeout)

    def _update(self, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        return self._store.update(self.name, change)

    def _check_interrupt(self) -> None:
        if self._abort_reason is not None:
            raise _Interrupted("abort", self._abort_reason)
        if self._stop.is_set():
            raise _Interrupted("stop")
        now = time.monotonic()
        if now > self._wait_deadline:  # first: the wall time since creation is never below the training time
            raise _Interrupted("max_wait")
        if now > self._deadline:
            raise _Interrupted("max_runtime")

    def _run(self) -> None:
        try:
            self._launch_instances()
            record = self._store.get(self.name)
            assert record is not None
            max_wait = (record.get("StoppingCondition") or {}).get("MaxWaitTimeInSeconds")
            if self.spot is not None and max_wait is not None:  # wall time since the job was created
                self._wait_deadline = time.monotonic() + float(max_wait) - (time.time() - record["CreationTime"])
            while True:
                entry = self._prepare()
                try:
                    self._train(record, entry)
                    break
                except SpotInterruption:
                    self._restart()
        except _Interrupted as interrupt:
            self._conclude(self._conclude_interrupt, interrupt)
        except JobFailure as failure:
            self._conclude(self._fail, failure.reason)
        except Exception as exc:
            log.exception("job %s: local endpoint error", self.name)
            self._conclude(self._fail, f"InternalServerError: the local endpoint failed while running the job: {exc!r}")
        finally:
            self._on_done(self.name)

    def _prepare(self) -> EntryPoint:
        """One run's Downloading: the hosts laid out, their checkpoints restored; then Training."""
        now = time.time()

        def downloading(r: dict[str, Any]) -> None:
            add_transition(r, "Downloading", "Downloading input data", now)
            r.setdefault("TrainingStartTime", now)
            r["_RunStart"] = now

        record = self._update(downloading)
        max_runtime = (record.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds", DEFAULT_MAX_RUNTIME_SECONDS)
        self._deadline = time.monotonic() + float(max_runtime) - float(record.get("_TrainedSeconds", 0.0))
        self._check_interrupt()
        entry = prepare_hosts(
            record=record,
            cluster=self._cluster,
            s3=self._s3(),
            job_dir=self._store.job_dir(self.name),
            check_interrupt=self._check_interrupt,
            max_source_bytes=self._options.max_source_bytes,
            max_channel_bytes=self._options.max_channel_bytes,
        )
        self._check_interrupt()
        if entry.command is not None:
            self._check_isolation()
        if self._checkpoints is None:
            interval = self._options.spot.checkpoint_sync_interval
            self._checkpoints = CheckpointSync.of(record, self._cluster.hosts, self._s3(), interval)
        if self._checkpoints is not None:
            self._checkpoints.restore()
        self._check_interrupt()
        message = "Training image download completed. Training in progress."
        self._update(lambda r: add_transition(r, "Training", message))
        if self.spot is not None:
            self.spot.begin_training(time.monotonic())
        return entry

    def _restart(self) -> None:
        """After a spot interruption (hosts ended, checkpoints copied): Interrupted, the wait, Restarting, Starting."""
        now = time.time()

        def interrupted(r: dict[str, Any]) -> None:
            r["_TrainedSeconds"] = float(r.get("_TrainedSeconds", 0.0)) + now - float(r.pop("_RunStart", now))
            add_transition(r, "Interrupted", SPOT_INTERRUPTED_MESSAGE, now)

        self._update(interrupted)
        self._deadline = float("inf")  # MaxRuntimeInSeconds counts training time; MaxWait keeps counting
        log.info("job %s: spot interruption %d", self.name, self.spot.interruptions if self.spot else 0)
        until = time.monotonic() + self._options.spot.restart_delay
        while time.monotonic() < until:
            self._check_interrupt()
            self._stop.wait(min(self._options.poll_interval, max(0.0, until - time.monotonic())))
        self._check_interrupt()
        self._update(lambda r: add_transition(r, "Restarting", RESTARTING_MESSAGE))
        self._procs = {}
        for host in self._cluster.hosts:  # new instances: nothing of the last run is left on them
            shutil.rmtree(host.base_dir, ignore_errors=True)
        self._update(lambda r: add_transition(r, "Starting", LAUNCHING_INSTANCES_MESSAGE))

    def _conclude(self, ending: Callable[[Any], None], argument: Any) -> None:
        """Terminate what still runs, then record the ending; never leave the job InProgress."""
        try:
            self._terminate_all()
            ending(argument)
        except Exception as exc:
            log.exception("job %s: could not record its ending", self.name)
            self._fail(f"InternalServerError: the local endpoint failed while ending the job: {exc!r}")

    def _launch_instances(self) -> None:
        """Take the job's instances; a :class:`JobFailure` with SageMaker's CapacityError when they do not fit.

        The open Starting transition says what SageMaker says meanwhile; the job then fails at once
        (SageMaker retries a while first) and keeps no claim: capacity freed later does not rescue it.
        """
        key = self._store.key(self.name)
        try:
            self._capacity.place(key)
        except CapacityShortage as short:
            log.info("job %s: no capacity: %s", self.name, short.shortage)

            def insufficient(r: dict[str, Any]) -> None:
                r["SecondaryStatusTransitions"][-1]["StatusMessage"] = INSUFFICIENT_CAPACITY_MESSAGE

            self._update(insufficient)
            raise JobFailure(CAPACITY_ERROR_REASON) from None

    def _check_isolation(self) -> None:
        """Fail the job, before any host starts, when hosts cannot get their own ``/opt/ml`` here."""
        first = self._cluster.hosts[0]
        problem = opt_ml_problem(first.base_dir)
        if problem is not None:
            raise JobFailure(
                "ClientError: The local endpoint runs a ContainerEntrypoint on every host with the host's own "
                "folder as /opt/ml, which needs a mount namespace: run the endpoint as root, or where "
                f"unprivileged user namespaces are allowed. {problem}. No host was started."
            )

    def _s3(self) -> Any:
        return self._clients.get("s3", self._region)

    def _train(self, record: dict[str, Any], entry: EntryPoint) -> None:
        shipper = LogShipper(self._clients.get("logs", self._region), interval=self._options.log_flush_interval)
        cloudwatch = self._clients.get("cloudwatch", self._region)
        sampler = MetricsSampler(cloudwatch, self.name, interval=self._options.metrics_interval)
        definitions = (record.get("AlgorithmSpecification") or {}).get("MetricDefinitions") or []
        matcher = MetricMatcher(cloudwatch, self.name, definitions, interval=self._options.log_flush_interval)
        shipper.start()
        sampler.start()
        matcher.start()
        interrupted = False
        try:
            self._start_hosts(record, entry, shipper, sampler, matcher)
            failed = self._supervise(sampler)
        except SpotInterruption:
            interrupted = True  # the job keeps its hosts' slot and instances for its restart
            raise
        finally:
            self._terminate_all(release=not interrupted)
            for name, proc in self._procs.items():  # last figures of the hosts terminated just now
                sampler.finish(name, proc.usage)
            sampler.close()
            shipper.close()
            matcher.close()
            final = matcher.final_metrics()
            if final:
                self._update(lambda r: r.__setitem__("FinalMetricDataList", final))
            if self._checkpoints is not None:  # what the hosts wrote last, before Interrupted or the ending
                self._checkpoints.sync()
        if isinstance(failed, str):
            raise JobFailure(failed)
        if failed is not None:
            host, code = failed
            raise JobFailure(failure_reason(host, code, self._error_lines(host)))
        self._update(lambda r: add_transition(r, "Uploading", "Uploading generated training model"))
        self._upload(required=True)
        self._update(lambda r: finish(r, "Completed", "Completed", "Training job completed"))

    def _start_hosts(
        self,
        record: dict[str, Any],
        entry: EntryPoint,
        shipper: LogShipper,
        sampler: MetricsSampler,
        matcher: MetricMatcher,
    ) -> None:
        logs_dir = self._store.job_dir(self.name) / "logs"
        logs_dir.mkdir(parents=True, exist_ok=True)
        install_resolver(self._resolver_dir)
        facts: list[dict[str, Any]] = []
        for host in self._cluster.hosts:
            self._check_interrupt()
            spec = host_spec(
                record,
                entry,
                self._cluster,
                host,
                region=self._region,
                endpoint_url=self._clients.endpoint_url,
                resolver_dir=self._resolver_dir,
                job_name=self.name,
            )
            stream = self._streams.setdefault(host.name, stream_name(self.name, host.name, int(time.time())))
            shipper.open_stream(stream)
            proc = HostProcess(
                host.name,
                spec.argv,
                env=spec.env,
                cwd=spec.cwd,
                log_file=logs_dir / f"{host.name}.log",
                sink=functools.partial(_emit, shipper, matcher, stream),
                mark=host_mark(host.base_dir),
                grace=self._options.stop_grace,
                opt_ml=spec.opt_ml,
            )
            for line in spec.banner:
                proc.write_line(line)
            pid = proc.start()
            self._procs[host.name] = proc
            sampler.watch(host.name, pid)
            facts.append(
                {
                    "host": host.name,
                    "group": host.group,
                    "instance_type": host.instance_type,
                    "address": host.address,
                    "base_dir": str(host.base_dir),
                    "pid": pid,
                    "create_time": _create_time(pid),
                    "log_stream": stream,
                }
            )
            self._store.save_hosts(self.name, facts)

    def _supervise(self, sampler: MetricsSampler) -> tuple[Host, int] | str | None:
        """Wait for the hosts; return (host, code) of the first failed host, None when all succeeded.

        A host whose output could not be recorded (the disk is full) ends the job: the reason is returned.
        """
        hosts = {h.name: h for h in self._cluster.hosts}
        ended: set[str] = set()
        while True:
            for name, proc in self._procs.items():
                if proc.write_error is not None:
                    return (
                        f"ClientError: The local endpoint could not record the output of host {name} "
                        f"(instance group {hosts[name].group}): {proc.write_error}. The disk holding "
                        f"{self._store.job_dir(self.name)} is probably full; free some space and run the job again."
                    )
            codes = {name: proc.poll() for name, proc in self._procs.items()}
            for name, code in codes.items():
                if code is not None and name not in ended:
                    ended.add(name)
                    sampler.finish(name, self._procs[name].usage)
            failed = [(hosts[n], c) for n, c in codes.items() if c is not None and c != 0]
            if failed:
                return min(failed, key=lambda item: item[0].number)
            if all(code == 0 for code in codes.values()):
                return None
            self._check_interrupt()
            self._spot_tick()
            time.sleep(self._options.poll_interval)

    def _spot_tick(self) -> None:
        """Copy the checkpoints when it is time; :class:`SpotInterruption` when the spot instances are taken back."""
        if self._checkpoints is not None:
            self._checkpoints.maybe_sync()
        if self.spot is not None and self.spot.due(time.monotonic()):
            raise SpotInterruption(self.name)

    def _error_lines(self, host: Host) -> list[str]:
        failure_file = host.output_dir / "failure"
        if failure_file.is_file():
            text = failure_file.read_text(encoding="utf-8", errors="replace").strip()
            if text:
                return text.splitlines()[-10:]
        return self._procs[host.name].error_tail()

    def _terminate_all(self, *, release: bool = True) -> None:
        """SIGTERM every host at once, then kill what still runs when one shared grace period is over.

        Everything of every host is killed, by process tree and by host mark (so also what a host whose
        shim is gone left behind); then each host is reaped, every killed process waited for until it is
        gone, and each host's output drained, each step bounded. Then the hosts are released.
        """
        procs = list(self._procs.values())
        for proc in procs:
            if proc.poll() is None:
                proc.signal_group(signal.SIGTERM)
        deadline = time.monotonic() + self._options.stop_grace
        for proc in procs:
            proc.wait(max(0.0, deadline - time.monotonic()))
        ended = self._kill(procs) if procs else []
        if ended:
            log.info("job %s: killed %d process(es) of its hosts after the grace", self.name, len(ended))
        deadline = time.monotonic() + KILL_WAIT
        for proc in procs:
            proc.wait(max(0.0, deadline - time.monotonic()))
        # a killed process is not gone at once: also wait for those no host's tree or output leads to
        left = wait_gone(ended, max(0.0, deadline - time.monotonic()))
        if left:
            log.warning("job %s: %d killed process(es) still there after %.0f s", self.name, len(left), KILL_WAIT)
        deadline = time.monotonic() + KILL_WAIT
        for proc in procs:
            proc.join_output(max(0.0, deadline - time.monotonic()))
        if release:
            self._on_hosts_ended(self.name)

    def kill_hosts(self) -> list[EndedProcess]:
        """SIGKILL every process of the job's hosts now, from any thread (the endpoint's last resort)."""
        return self._kill(list(self._procs.values()))

    def _kill(self, procs: list[HostProcess]) -> list[EndedProcess]:
        """SIGKILL the trees and groups of ``procs`` and every process marked as one of the job's hosts,
        in one sweep (it reads every process's environment; each process is reported once)."""
        ended = kill_tree([pid for proc in procs for pid in proc.live_pids()], self._store.job_dir(self.name) / "hosts")
        for proc in procs:
            proc.kill_group()
        return ended

    def interrupt(self) -> bool:
        """Take this spot job's instances back at its next look; False when it is not a spot job."""
        if self.spot is None:
            return False
        self.spot.request()
        return True

    def is_alive(self) -> bool:
        """True while the job's thread runs."""
        return self._thread.is_alive()

    def _upload(self, *, required: bool) -> None:
        """Merge the hosts' model dirs into model.tar.gz (and output/data into output.tar.gz)."""
        from botocore.exceptions import ClientError

        record = self._store.get(self.name)
        assert record is not None
        base = join_uri(record["OutputDataConfig"]["S3OutputPath"], self.name, "output")
        model_dirs = [h.model_dir for h in self._cluster.hosts]
        data_dirs = [h.output_dir / "data" for h in self._cluster.hosts]
        if not required and not any(d.is_dir() for d in model_dirs):
            return  # ended before any host was laid out: nothing to upload
        model_uri = f"{base}/model.tar.gz"
        try:
            upload(self._s3(), model_uri, tar_directories(model_dirs))
            if has_files(data_dirs):
                upload(self._s3(), f"{base}/output.tar.gz", tar_directories(data_dirs))
        except ClientError as exc:
            if required:
                raise JobFailure(f"ClientError: Could not upload the model to {model_uri}: {exc}") from exc
            log.warning("job %s: could not upload the model of a stopped job: %s", self.name, exc)
            return
        self._update(lambda r: r.__setitem__("ModelArtifacts", {"S3ModelArtifacts": model_uri}))

    def _fail(self, reason: str) -> None:
        def change(record: dict[str, Any]) -> None:
            record["FailureReason"] = reason[:MAX_FAILURE_REASON]
            finish(record, "Failed", "Failed", "Training job failed")

        self._update(change)

    def _conclude_interrupt(self, interrupt: _Interrupted) -> None:
        if interrupt.kind == "abort":
            self._fail(interrupt.reason)
            return
        self._upload(required=False)
        if interrupt.kind == "max_wait":
            self._update(lambda r: finish(r, "Stopped", "MaxWaitTimeExceeded", MAX_WAIT_EXCEEDED_MESSAGE))
        elif interrupt.kind == "max_runtime":
            self._update(
                lambda r: finish(
                    r,
                    "Stopped",
                    "MaxRuntimeExceeded",
                    "Training job runtime exceeded MaxRuntimeInSeconds provided",
                )
            )
        else:
            self._update(lambda r: finish(r, "Stopped", "Stopped", "Training job stopped"))


def _emit(shipper: LogShipper, matcher: MetricMatcher, stream: str, line: str, timestamp_ms: int) -> None:
    shipper.emit(stream, line, timestamp_ms)
    matcher.observe(line, timestamp_ms)


def _create_time(pid: int) -> float | None:
    import psutil

    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return None
