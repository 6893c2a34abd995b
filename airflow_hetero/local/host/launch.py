"""What a host process is started with: its command line and its environment.

The environment is the endpoint's own minus anything that would point the host at real AWS or a
previous job (``AWS_*``, ``SM_*``, ...), plus fake credentials and ``AWS_ENDPOINT_URL`` (so boto3
inside a script talks to the endpoint), the request's ``Environment``, the toolkit's ``SM_*``
block, the launcher variables, and the host-name resolver first on ``PYTHONPATH``
(:mod:`airflow_hetero.local.host.resolver`, copied as ``sitecustomize.py`` by :func:`install_resolver`).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path

from airflow_hetero.local.host import resolver
from airflow_hetero.sagemaker_facts import HOST_ADDRESSES_ENV

INHERIT_DROP = ("SM_", "AWS_", "SAGEMAKER_", "AIRFLOW_HETERO_", "TRAINING_JOB_")


def install_resolver(directory: Path) -> None:
    """Write the host-name resolver as ``directory/sitecustomize.py``."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(resolver.__file__, directory / "sitecustomize.py")


def command(program: str, args: list[str]) -> list[str]:
    """The toolkit's command line: ``python -- train.py --hp value ...``, other programs through sh."""
    if program.endswith(".py"):
        return [sys.executable, "--", program, *args]
    return ["/bin/sh", "-c", f"./{shlex.quote(program)} " + " ".join(shlex.quote(a) for a in args)]


def host_environment(
    *,
    region: str,
    endpoint_url: str,
    credentials: tuple[str, str],
    request_env: dict[str, str],
    variables: dict[str, str],
    launcher: dict[str, str],
    job: dict[str, str],
    addresses: dict[str, str],
    base_dir: Path,
    code_dir: Path,
    resolver_dir: Path,
    container: bool = False,
) -> dict[str, str]:
    """The full environment of one host process (``job``: TRAINING_JOB_NAME / TRAINING_JOB_ARN).

    ``credentials`` (access key, secret key) are the endpoint's fake ones, with ``endpoint_url``.
    A ``container`` host (it sees its tree as ``/opt/ml``) gets no ``SAGEMAKER_BASE_DIR`` and no code
    dir on ``PYTHONPATH``, as in a container, and the endpoint's Python first on ``PATH`` (so the
    ``python3`` and ``pip`` a command finds are the ones that run the endpoint), which the request's
    ``Environment`` may override.
    """
    access_key, secret_key = credentials
    env = {k: v for k, v in os.environ.items() if not k.startswith(INHERIT_DROP)}
    env.update(
        {
            "AWS_ACCESS_KEY_ID": access_key,
            "AWS_SECRET_ACCESS_KEY": secret_key,
            "AWS_DEFAULT_REGION": region,
            "AWS_REGION": region,
            "AWS_ENDPOINT_URL": endpoint_url,
        }
    )
    if container:
        env["PATH"] = os.pathsep.join(p for p in (os.path.dirname(sys.executable), env.get("PATH")) if p)
    env.update(request_env)
    env.update(variables)
    env.update(launcher)
    env.update(job)
    paths = (str(resolver_dir),) if container else (str(resolver_dir), str(code_dir))
    env.update(
        {
            HOST_ADDRESSES_ENV: json.dumps(addresses),
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": os.pathsep.join(p for p in (*paths, os.environ.get("PYTHONPATH")) if p),
        }
    )
    if not container:
        env["SAGEMAKER_BASE_DIR"] = str(base_dir)
    return env
