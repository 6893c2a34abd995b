"""Training-job names: SageMaker's pattern and length, and stable names for Airflow retries.

A name derived for a task instance is ``<base>-<hash>`` where the hash covers dag_id,
task_id, run_id and map index, so a retry of the same task instance finds the job its
earlier try started. When that job failed, the next one is ``<base>-<hash>-<n>``. The hash takes
every character the 63-character limit leaves after the base and the longest retry suffix
(``-99``), in base 36: at least 8 characters (41 bits), 48 (248 bits) for an 11-character base.
The name alone is still never trusted: a job is re-attached only when its identity tags match
(:mod:`airflow_hetero.job.identity`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator

MAX_JOB_NAME = 63
#: Fewest hash characters a derived name carries (``-<hash>-<up to 2 digits>`` follows the base).
MIN_HASH_CHARS = 8
#: ``-<at least 8 hash characters>-<up to 2 digits>``: the shortest suffix airflow-hetero appends.
SUFFIX_LENGTH = 1 + MIN_HASH_CHARS + 3
MAX_BASE_JOB_NAME = MAX_JOB_NAME - SUFFIX_LENGTH
MAX_ATTEMPT = 99
_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")
_IMAGE = re.compile(r"^(.+/)?([^:/@]+)([:@][^:/]+)?$")


def check_job_name(name: str, max_length: int = MAX_JOB_NAME) -> str | None:
    """Why ``name`` is not a valid TrainingJobName (of at most ``max_length`` characters), or None when it is."""
    if not 1 <= len(name) <= max_length:
        if max_length != MAX_JOB_NAME:  # a queue's payload: Batch adds its prefix and attempt id
            return (
                f"'{name}' is {len(name)} characters; at most {max_length} in a queue's payload, as AWS Batch names "
                f"each attempt's training job AWSBatch<name><32 hex> within SageMaker's {MAX_JOB_NAME}"
            )
        return f"'{name}' is {len(name)} characters; SageMaker allows 1 to {MAX_JOB_NAME}"
    if not _NAME.match(name):
        return f"'{name}' may contain only letters, digits and '-', and must start and end with a letter or digit"
    return None


def check_base_job_name(base: str) -> str | None:
    """Why ``base`` cannot prefix derived job names, or None when it can."""
    if not _NAME.match(base):
        return (
            f"'{base}' may contain only letters, digits and '-' (no '_' or '.'), "
            "and must start and end with a letter or digit"
        )
    if len(base) > MAX_BASE_JOB_NAME:
        return (
            f"'{base}' is {len(base)} characters; at most {MAX_BASE_JOB_NAME}, so that the "
            f"{SUFFIX_LENGTH}-character suffix added per task instance keeps the job name "
            f"within SageMaker's {MAX_JOB_NAME}"
        )
    return None


def base_name_from_image(image_uri: str) -> str:
    """The repository part of an image URI, as the SDK uses it for default job names."""
    match = _IMAGE.match(image_uri)
    return sanitize_base(match.group(2) if match else image_uri)


def sanitize_base(text: str) -> str:
    """Make any text a valid base job name (invalid characters become '-', length capped)."""
    cleaned = re.sub(r"[^a-zA-Z0-9-]+", "-", text).strip("-")[:MAX_BASE_JOB_NAME].strip("-")
    return cleaned or "training"


_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def full_digest(*parts: object) -> str:
    """The SHA-256 (64 hex characters) of ``parts``, joined by a separator no part contains."""
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).hexdigest()


def stable_hash(*parts: object, length: int = MIN_HASH_CHARS) -> str:
    """``length`` base-36 characters (up to 49, 5.17 bits each) that depend only on ``parts``."""
    if not 1 <= length <= 49:
        raise ValueError(f"length must be between 1 and 49, got {length}")
    value = int(full_digest(*parts), 16)
    chars = []
    for _ in range(length):
        value, digit = divmod(value, 36)
        chars.append(_BASE36[digit])
    return "".join(chars)


def hash_length(base: str, max_length: int = MAX_JOB_NAME) -> int:
    """How many hash characters fit after ``base`` with room for the longest retry suffix."""
    room = max_length - len(base) - 1 - len(f"-{MAX_ATTEMPT}")
    return max(MIN_HASH_CHARS, min(room, 49))


def task_key(base: str, *parts: object, max_length: int = MAX_JOB_NAME) -> str:
    """The hash part of derived names for ``base``: as long as the 63-character limit (or ``max_length``) allows."""
    return stable_hash(*parts, length=hash_length(base, max_length))


def derived_job_name(base: str, key: str, attempt: int = 0, max_length: int = MAX_JOB_NAME) -> str:
    """``<base>-<key>`` for the first job of a task instance, ``<base>-<key>-<attempt>`` after."""
    if not 0 <= attempt <= MAX_ATTEMPT:
        raise ValueError(f"attempt must be between 0 and {MAX_ATTEMPT}, got {attempt}")
    name = f"{base}-{key}" if attempt == 0 else f"{base}-{key}-{attempt}"
    problem = check_job_name(name, max_length)
    if problem:
        raise ValueError(problem)
    return name


def task_job_names(base: str, *parts: object, max_length: int = MAX_JOB_NAME) -> Iterator[str]:
    """The names a task instance's jobs take in order: ``<base>-<key>``, then ``-1`` to ``-99`` appended.

    ``max_length`` below 63 (a queue's payload) cuts a base too long to leave room for the suffix."""
    base = fitted_base(base, max_length)
    key = task_key(base, *parts, max_length=max_length)
    return (derived_job_name(base, key, attempt, max_length) for attempt in range(MAX_ATTEMPT + 1))


def fitted_base(base: str, max_length: int = MAX_JOB_NAME) -> str:
    """``base`` cut (at a letter or digit) so that ``<base>-<8 hash characters>-99`` fits ``max_length``."""
    return base[: max(1, max_length - SUFFIX_LENGTH)].rstrip("-") or "t"


def explicit_job_names(job_name: str, max_length: int = MAX_JOB_NAME) -> list[str]:
    """``job_name``, then ``job_name-1`` to ``-99``; ValueError unless the longest is a valid name too."""
    for name in (job_name, f"{job_name}-{MAX_ATTEMPT}"):
        problem = check_job_name(name, max_length)
        if problem:
            raise ValueError(f"{problem} (retries append up to -{MAX_ATTEMPT})")
    return [job_name, *(f"{job_name}-{attempt}" for attempt in range(1, MAX_ATTEMPT + 1))]
