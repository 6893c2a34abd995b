"""Training-job records persisted under the workdir, one JSON file per job.

Each record is the DescribeTrainingJob answer itself (timestamps as epoch seconds, which is how
the JSON protocol carries them), so describing a job is reading a file, and the state survives an
endpoint restart. Writes are atomic (temp file + rename): a crash never leaves half a record.
Names are unique case-insensitively, as SageMaker ARNs are lower-case and as case-insensitive file
systems would force anyway.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_hetero.local.training.spot import billable_seconds

TERMINAL = frozenset({"Completed", "Failed", "Stopped"})
RECORD_FILE = "job.json"
log = logging.getLogger(__name__)
HOSTS_FILE = "hosts.json"


class JobExists(Exception):
    """A record of that name is already stored; ``arn`` is the existing job's."""

    def __init__(self, arn: str) -> None:
        super().__init__(arn)
        self.arn = arn


def _write_json(path: Path, data: Any) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` to ``path`` atomically (temp file + rename): a crash never leaves half a file
    (the offline queue's store writes its files so too)."""
    _write_json(path, data)


def add_transition(record: dict[str, Any], status: str, message: str, now: float | None = None) -> None:
    """Move ``record`` to SecondaryStatus ``status``: close the open transition, open a new one."""
    now = time.time() if now is None else now
    transitions = record.setdefault("SecondaryStatusTransitions", [])
    if transitions and "EndTime" not in transitions[-1]:
        transitions[-1]["EndTime"] = now
    entry: dict[str, Any] = {"Status": status, "StartTime": now, "StatusMessage": message}
    transitions.append(entry)
    record["SecondaryStatus"] = status
    record["LastModifiedTime"] = now


def model_uri(record: dict[str, Any]) -> str:
    """Where SageMaker puts a job's model: ``<S3OutputPath>/<job>/output/model.tar.gz``."""
    base = record["OutputDataConfig"]["S3OutputPath"].rstrip("/")
    return f"{base}/{record['TrainingJobName']}/output/model.tar.gz"


def finish(record: dict[str, Any], status: str, secondary: str, message: str, now: float | None = None) -> None:
    """Put ``record`` in a terminal state with its end time, durations and a closed last transition.

    ``BillableTimeInSeconds`` is wall-clock seconds, as the API defines it (the bill multiplies it
    by the instance count); ``ModelArtifacts`` is set on every ended job, as SageMaker does.
    ``TrainingTimeInSeconds`` counts the runs of a job (``_TrainedSeconds`` of the runs a spot
    interruption ended, plus the open one since ``_RunStart``), not the waits between them; a spot job
    (``_SpotSaving``, the endpoint's stand-in discount) bills that time less the discount.
    """
    now = time.time() if now is None else now
    add_transition(record, secondary, message, now)
    record["SecondaryStatusTransitions"][-1]["EndTime"] = now
    record["TrainingJobStatus"] = status
    record["TrainingEndTime"] = now
    record.setdefault("ModelArtifacts", {"S3ModelArtifacts": model_uri(record)})
    start = record.get("TrainingStartTime")
    if start is not None:
        if "_RunStart" in record or "_TrainedSeconds" in record:
            run_start = record.get("_RunStart")
            trained = float(record.get("_TrainedSeconds", 0.0)) + (now - run_start if run_start is not None else 0.0)
        else:  # a record of an endpoint before runs were counted
            trained = now - start
        seconds = max(1, round(trained))
        record["TrainingTimeInSeconds"] = seconds
        record["BillableTimeInSeconds"] = billable_seconds(seconds, record.get("_SpotSaving"))


class JobStore:
    """Thread-safe records of every job this workdir has seen."""

    def __init__(self, workdir: Path) -> None:
        self.root = workdir / "jobs"
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._records: dict[str, dict[str, Any]] = {}
        for path in sorted(self.root.glob(f"*/{RECORD_FILE}")):
            record = json.loads(path.read_text(encoding="utf-8"))
            self._records[path.parent.name] = record

    @staticmethod
    def key(name: str) -> str:
        """The directory name and lookup key of a job (names are unique case-insensitively)."""
        return name.lower()

    def job_dir(self, name: str) -> Path:
        """Where everything of job ``name`` lives (record, host dirs, logs)."""
        return self.root / self.key(name)

    def create(self, record: dict[str, Any]) -> None:
        """Store a new record; :class:`JobExists` when the name is taken (case-insensitively).

        The record is known only once its file is written: when the disk is full, nothing is left
        behind (no directory, no record) and the ``OSError`` saying why reaches the caller (the
        service answers ``ResourceInUse`` and ``ResourceLimitExceeded``, as SageMaker does).
        """
        name = record["TrainingJobName"]
        with self._lock:
            existing = self._records.get(self.key(name))
            if existing is not None:
                raise JobExists(existing["TrainingJobArn"])
            job_dir = self.job_dir(name)
            try:
                job_dir.mkdir(parents=True, exist_ok=True)
                _write_json(job_dir / RECORD_FILE, record)
            except OSError:
                shutil.rmtree(job_dir, ignore_errors=True)
                raise
            self._records[self.key(name)] = record

    def get(self, name: str) -> dict[str, Any] | None:
        """A copy of the record of ``name``, or None."""
        with self._lock:
            record = self._records.get(self.key(name))
            return copy.deepcopy(record) if record is not None else None

    def update(self, name: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Apply ``change`` to the record under the lock, persist it, and return a copy.

        A record file that cannot be written (full disk) keeps the change in memory, so the job still
        moves on and ends as described; the file catches up at the next write that succeeds.
        """
        with self._lock:
            record = self._records[self.key(name)]
            change(record)
            try:
                _write_json(self.job_dir(name) / RECORD_FILE, record)
            except OSError as exc:
                log.warning("could not write the record of %s (kept in memory): %s", name, exc)
            return copy.deepcopy(record)

    def records(self) -> list[dict[str, Any]]:
        """Copies of all records."""
        with self._lock:
            return [copy.deepcopy(r) for r in self._records.values()]

    def save_hosts(self, name: str, hosts: list[dict[str, Any]]) -> None:
        """Persist the per-host runtime facts (pids, addresses, dirs) the endpoint needs after a restart."""
        _write_json(self.job_dir(name) / HOSTS_FILE, hosts)

    def load_hosts(self, name: str) -> list[dict[str, Any]]:
        """The per-host facts saved by :meth:`save_hosts` (empty when the job never started hosts)."""
        path = self.job_dir(name) / HOSTS_FILE
        if not path.exists():
            return []
        data: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
        return data
