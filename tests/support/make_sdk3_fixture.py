"""Re-make tests/data/sdk3-drivers/: real output of SDK v3's drivers, run on the offline endpoint.

Run from the repository root, in an emptied environment so the drivers' dump of the whole container
environment holds little of this machine's (the v3 venv must exist: ``make .venv-sdk3/.installed-stamp``)::

    env -i PATH=/usr/bin:/bin HOME=/tmp LANG=C.UTF-8 PYTHONPATH=$PWD .venv/bin/python tests/support/make_sdk3_fixture.py

It starts a LocalEndpoint, lets tests/support/sdk3_client.py run its ``fixture`` jobs (two groups,
``SM_LOG_LEVEL`` 20 and 30, ``NCCL_DEBUG=WARN`` and ``LOG_LEVEL=ERROR`` in the job's environment),
and keeps, per job, each host's log exactly as the host printed it (``algo-N.log``, one line per
CloudWatch event) and which group each host was in (``hosts.json``, the endpoint's record).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from airflow_hetero.local import LocalEndpoint, RunOptions

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "data" / "sdk3-drivers"
CONFIG = "SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n      TelemetryOptOut: true\n"


def main() -> None:
    with tempfile.TemporaryDirectory() as work, LocalEndpoint(run=RunOptions(log_flush_interval=0.2)) as endpoint:
        config = Path(work) / "sagemaker-config.yaml"
        config.write_text(CONFIG)
        env = {**os.environ, **endpoint.environ(), "SAGEMAKER_USER_CONFIG_OVERRIDE": str(config)}
        env.pop("PYTHONPATH", None)
        client = ROOT / "tests" / "support" / "sdk3_client.py"
        done = subprocess.run(
            [str(ROOT / ".venv-sdk3" / "bin" / "python"), str(client), work, "fixture"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
        line = next(x for x in done.stdout.splitlines() if x.startswith("SDK3-RESULT "))
        names = json.loads(line.removeprefix("SDK3-RESULT "))["fixture"]
        for level, name in names.items():
            target = OUT / f"log{level}"
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            job = endpoint.job_dir(name)
            for log in sorted((job / "logs").glob("algo-*.log")):
                shutil.copyfile(log, target / log.name)
            hosts = json.loads((job / "hosts.json").read_text())
            kept = {"job": name, "hosts": {h["host"]: h["group"] for h in hosts}}
            (target / "hosts.json").write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n")
            print(f"{target.relative_to(ROOT)}: {name}, {len(hosts)} hosts", file=sys.stderr)


if __name__ == "__main__":
    main()
