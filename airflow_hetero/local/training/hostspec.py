"""How one host of a job starts: its command line, environment, working directory and banner.

A script-mode host (SDK v2) runs the toolkit's command line in its code dir, with the toolkit's
``SM_*`` block, the launcher variables and the toolkit's start-up banner. A container host (the
request's ``ContainerEntrypoint``, SDK v3) runs that command as given, in its own mount namespace
where its tree is ``/opt/ml``, with what the platform gives a container and nothing of the toolkit:
no ``SM_*`` variables and no banner (v3's drivers compute and print their own).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_hetero.local.host import toolkit_env
from airflow_hetero.local.host.launch import command, host_environment
from airflow_hetero.local.training.clients import FAKE_ACCESS_KEY, FAKE_SECRET_KEY
from airflow_hetero.local.training.layout import Cluster, Host
from airflow_hetero.local.training.prepare import EntryPoint


@dataclass(frozen=True)
class HostSpec:
    """What :class:`~airflow_hetero.local.host.process.HostProcess` needs to start one host."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    banner: list[str]
    opt_ml: Path | None
    """The host's tree, mounted on ``/opt/ml`` for it (container hosts); None for script mode."""


def host_spec(
    record: dict[str, Any],
    entry: EntryPoint,
    cluster: Cluster,
    host: Host,
    *,
    region: str,
    endpoint_url: str,
    resolver_dir: Path,
    job_name: str,
) -> HostSpec:
    """The start of ``host``: container mode when ``entry.command`` is set, else script mode."""
    container = entry.command is not None
    variables: dict[str, str] = {}
    launcher: dict[str, str] = {}
    banner: list[str] = []
    if entry.command is not None:
        argv = list(entry.command)
    else:
        assert entry.program is not None
        data_config = json.loads((host.config_dir / "inputdataconfig.json").read_text(encoding="utf-8"))
        env_block = toolkit_env.training_env(
            resource=cluster.resource_config(host),
            data_config=data_config,
            raw_hyperparameters=record.get("HyperParameters") or {},
            base_dir=host.base_dir,
            job_name=job_name,
        )
        variables = toolkit_env.env_vars(env_block)
        launcher = toolkit_env.launcher_env(env_block, cluster.addresses())
        argv = command(entry.program, toolkit_env.user_args(env_block["hyperparameters"]))
        now = time.time()
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)) + f",{int(now * 1000) % 1000:03d}"
        banner = toolkit_env.startup_lines(env_block, variables, argv, stamp)
    env = host_environment(
        region=region,
        endpoint_url=endpoint_url,
        credentials=(FAKE_ACCESS_KEY, FAKE_SECRET_KEY),
        request_env=record.get("Environment") or {},
        variables=variables,
        launcher=launcher,
        job={"TRAINING_JOB_NAME": job_name, "TRAINING_JOB_ARN": record["TrainingJobArn"]},
        addresses=cluster.addresses(),
        base_dir=host.base_dir,
        code_dir=host.code_dir,
        resolver_dir=resolver_dir,
        container=container,
    )
    return HostSpec(
        argv=argv,
        env=env,
        cwd=host.base_dir if container else host.code_dir,
        banner=banner,
        opt_ml=host.base_dir if container else None,
    )
