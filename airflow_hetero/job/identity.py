"""Which task instance a training job belongs to: identity tags, and the check before re-attaching.

A job name alone can collide (another run, another map index, a job someone else started), so
every job this package submits carries its task instance's identity twice: as tags
(``airflow-hetero:dag-id`` ... ``airflow-hetero:identity``, usable for cost allocation too) and as
the container environment variable ``AIRFLOW_HETERO_IDENTITY``, which DescribeTrainingJob echoes
(no extra call, no ``sagemaker:ListTags`` permission). The full SHA-256 digest decides; the readable
tags are for people.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from airflow_hetero.definition.naming import full_digest

TAG_PREFIX = "airflow-hetero:"
IDENTITY_TAG = f"{TAG_PREFIX}identity"
IDENTITY_ENV = "AIRFLOW_HETERO_IDENTITY"
#: Tags SageMaker accepts on one training job.
MAX_TAGS = 50
#: SageMaker tag values: at most 256 characters of letters, digits, spaces and ``_.:/=+-@``.
_TAG_VALUE_MAX = 256
_TAG_UNSAFE = re.compile(r"[^\w .:/=+\-@]", re.ASCII)


def tag_value(text: str) -> str:
    """``text`` as a valid tag value (other characters become ``_``, cut to 256)."""
    return _TAG_UNSAFE.sub("_", text)[:_TAG_VALUE_MAX]


@dataclass(frozen=True)
class TaskIdentity:
    """dag_id, task_id, run_id and map_index of one task instance, and their full digest."""

    dag_id: str
    task_id: str
    run_id: str
    map_index: int = -1

    @classmethod
    def of(cls, ti: Any) -> TaskIdentity:
        """The identity of a task instance (``context["ti"]``)."""
        map_index = getattr(ti, "map_index", -1)
        return cls(str(ti.dag_id), str(ti.task_id), str(ti.run_id), int(map_index if map_index is not None else -1))

    @property
    def digest(self) -> str:
        """SHA-256 hex of the four fields: equal digests mean the same task instance."""
        return full_digest(self.dag_id, self.task_id, self.run_id, self.map_index)

    def tags(self) -> list[dict[str, str]]:
        """CreateTrainingJob ``Tags`` naming this task instance."""
        return [
            {"Key": f"{TAG_PREFIX}dag-id", "Value": tag_value(self.dag_id)},
            {"Key": f"{TAG_PREFIX}task-id", "Value": tag_value(self.task_id)},
            {"Key": f"{TAG_PREFIX}run-id", "Value": tag_value(self.run_id)},
            {"Key": f"{TAG_PREFIX}map-index", "Value": str(self.map_index)},
            {"Key": IDENTITY_TAG, "Value": self.digest},
        ]

    def stamp(self, request: dict[str, Any]) -> dict[str, Any]:
        """A copy of ``request`` carrying this identity in its Tags and Environment.

        The user's own tags and environment are kept; tags and the variable of this package's
        (``airflow-hetero:*``, ``AIRFLOW_HETERO_IDENTITY``) are replaced, never duplicated.
        """
        out = dict(request)
        tags = [t for t in request.get("Tags") or () if not str(t.get("Key", "")).startswith(TAG_PREFIX)]
        out["Tags"] = [*tags, *self.tags()]
        if len(out["Tags"]) > MAX_TAGS:
            raise ValueError(
                f"tags: {len(tags)} tags leave no room for the {len(self.tags())} identity tags "
                f"(SageMaker allows {MAX_TAGS} per job: give at most {MAX_TAGS - len(self.tags())})"
            )
        out["Environment"] = {**(request.get("Environment") or {}), IDENTITY_ENV: self.digest}
        return out

    def __str__(self) -> str:
        index = "" if self.map_index < 0 else f"[{self.map_index}]"
        return f"{self.dag_id}.{self.task_id}{index} run {self.run_id}"


def identity_in_describe(describe: dict[str, Any]) -> str | None:
    """The identity digest a DescribeTrainingJob answer carries (its Environment), if any."""
    value = (describe.get("Environment") or {}).get(IDENTITY_ENV)
    return str(value) if value else None


def identity_in_tags(tags: list[dict[str, Any]]) -> str | None:
    """The identity digest in a ListTags answer, if any."""
    for tag in tags:
        if tag.get("Key") == IDENTITY_TAG and tag.get("Value"):
            return str(tag["Value"])
    return None
