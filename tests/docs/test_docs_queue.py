"""docs/queue.md: its example prints what the page shows, and its AWS CLI set-up (and the one
``local serve`` prints) runs against the offline queue."""

from __future__ import annotations

import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from support.doc_examples import run_example

from airflow_hetero.local import LocalEndpoint
from airflow_hetero.local.cli import describe_batch

pytestmark = pytest.mark.slow

PAGE = Path(__file__).resolve().parents[2] / "docs" / "queue.md"
AWS = Path(sys.executable).with_name("aws")


def test_the_offline_queue_example_prints_what_the_page_shows(tmp_path: Path) -> None:
    done, shown = run_example("queue.md", "offline-queue", tmp_path)
    assert shown is not None
    assert done.stdout == shown


def _commands(text: str) -> list[list[str]]:
    joined = text.replace("\\\n", " ")
    return [shlex.split(line.strip())[1:] for line in joined.splitlines() if line.strip().startswith("aws batch ")]


def _run(endpoint: LocalEndpoint, command: list[str]) -> None:
    env = {**os.environ, **endpoint.environ(), "AWS_PAGER": "", "AWS_CONFIG_FILE": os.devnull}
    done = subprocess.run([str(AWS), *command], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"{command}: {done.stderr}"


@pytest.mark.skipif(not AWS.exists(), reason="the AWS CLI is a dev dependency")
def test_the_aws_cli_set_up_of_the_page_and_of_local_serve_runs(tmp_path: Path) -> None:
    page = [c for block in re.findall(r"```bash\n(.*?)```", PAGE.read_text(), re.S) for c in _commands(block)]
    assert [c[1] for c in page] == ["create-service-environment", "create-scheduling-policy", "create-job-queue"]

    class Fresh:
        batch_setup: list[str] = []

    banner = io.StringIO()
    describe_batch(Fresh(), banner)
    printed = _commands(banner.getvalue())
    assert [c[1] for c in printed] == ["create-service-environment", "create-job-queue"]
    for commands in (page, printed):
        with LocalEndpoint(workdir=tmp_path / str(len(commands))) as endpoint:
            for command in commands:
                _run(endpoint, command)
            queue = endpoint.client("batch").describe_job_queues(jobQueues=["gpu-queue"])["jobQueues"][0]
            assert queue["serviceEnvironmentOrder"][0]["serviceEnvironment"].endswith("service-environment/gpu-env")
            if commands is page:
                assert queue["schedulingPolicyArn"].endswith(":scheduling-policy/teams")
                assert queue["jobStateTimeLimitActions"][0]["maxTimeSeconds"] == 3600


def test_the_page_is_in_the_nav_and_linked_from_local_runs() -> None:
    assert "queue.md" in (PAGE.parents[1] / "mkdocs.yml").read_text()
    assert "(queue.md)" in (PAGE.parent / "local.md").read_text()
