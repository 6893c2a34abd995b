"""The offline queue's state on disk, next to the training jobs': it survives an endpoint restart.

``<workdir>/batch/resources.json`` holds the service environments, job queues, scheduling policies
and the clientTokens seen; ``<workdir>/batch/jobs/<jobId>.json`` one service job each. Writes are
atomic (:func:`~airflow_hetero.local.training.store.write_json`); a file that cannot be written
(full disk) keeps the change in memory and catches up at the next write, as the training store does.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from airflow_hetero.local.batch.models import JobQueue, SchedulingPolicy, ServiceEnvironment, ServiceJob
from airflow_hetero.local.training.store import write_json

log = logging.getLogger(__name__)
RESOURCES_FILE = "resources.json"


class BatchStore:
    """Everything the offline queue knows, keyed by ARN (jobs by id); not thread-safe: the backend locks."""

    def __init__(self, workdir: Path) -> None:
        self.root = workdir / "batch"
        (self.root / "jobs").mkdir(parents=True, exist_ok=True)
        self.environments: dict[str, ServiceEnvironment] = {}
        self.queues: dict[str, JobQueue] = {}
        self.policies: dict[str, SchedulingPolicy] = {}
        self.tokens: dict[str, str] = {}
        """clientToken -> the id of the job first submitted with it."""
        self.jobs: dict[str, ServiceJob] = {}
        self._load()

    def _load(self) -> None:
        path = self.root / RESOURCES_FILE
        if path.exists():
            data = json.loads(path.read_text(encoding="utf-8"))
            self.environments = {e["arn"]: ServiceEnvironment.from_json(e) for e in data.get("environments", [])}
            self.queues = {q["arn"]: JobQueue.from_json(q) for q in data.get("queues", [])}
            self.policies = {p["arn"]: SchedulingPolicy.from_json(p) for p in data.get("policies", [])}
            self.tokens = dict(data.get("tokens", {}))
        for job_file in sorted((self.root / "jobs").glob("*.json")):
            job = ServiceJob.from_json(json.loads(job_file.read_text(encoding="utf-8")))
            self.jobs[job.job_id] = job

    def save_resources(self) -> None:
        data: dict[str, Any] = {
            "environments": [e.to_json() for e in self.environments.values()],
            "queues": [q.to_json() for q in self.queues.values()],
            "policies": [p.to_json() for p in self.policies.values()],
            "tokens": self.tokens,
        }
        self._write(self.root / RESOURCES_FILE, data)

    def save_job(self, job: ServiceJob) -> None:
        self.jobs[job.job_id] = job
        self._write(self.root / "jobs" / f"{job.job_id}.json", job.to_json())

    @staticmethod
    def _write(path: Path, data: Any) -> None:
        try:
            write_json(path, data)
        except OSError as exc:
            log.warning("could not write %s (kept in memory): %s", path, exc)
