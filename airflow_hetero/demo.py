"""``airflow-hetero demo``: the example retraining DAG end to end, offline.

Starts the offline endpoint without capacity for the example's training type (so the job falls
back to its ``fallback_instance_types``, docs/capacity.md), seeds its S3 with a week of example data, runs the
``hetero_retraining`` DAG with ``dag.test()`` against a throwaway SQLite Airflow home (on Airflow 3
as a manual run without a logical date), prints the per-group summary and verdict the DAG produced,
then runs ``hetero_model_deploy``, the DAG scheduled on the model asset the first one updated. No AWS
account, no containers. The DAGs are the ones the package ships (:mod:`airflow_hetero.example_dags`).

The terminal gets the demo's own lines; Airflow's log (task runner, DAG processor, warnings: all this
process and its children write to stdout and stderr) goes to ``<workdir>/airflow.log`` unless
``--verbose``. A failed task's lines are copied from there to the terminal.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import importlib.util
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

BUCKET = "airflow-hetero-demo"
MODEL_ASSET = f"s3://{BUCKET}/models"
DAG_FILE = "hetero_retraining_dag.py"
DEPLOY_DAG_FILE = "hetero_model_deploy_dag.py"
#: The example job's training type (hetero_retraining/job.yaml): the demo's endpoint has no capacity for
#: it, so the ``train`` task's first job fails with a CapacityError and the group falls back.
NO_CAPACITY_TYPE = "ml.g5.xlarge"
#: When the demo's weekly run happens; it trains on the data interval that ends then.
RUN_AFTER = datetime(2026, 11, 29, tzinfo=UTC)
TRUE_WEIGHTS, TRUE_BIAS, NOISE = (3.0, -2.0), 0.5, 0.1
#: Where a task's lines start in a ``dag.test()`` log (Airflow 2.11 and 3 alike).
_TASK_START = re.compile(r"\[DAG TEST\] starting task_id=(\S+)")
#: Where a run's lines end, after its last task.
_RUN_END = ("DagRun Finished", "Marking run <DagRun")
#: How many lines of a failed task's log are copied to the terminal: its first, then its last.
FAILED_TASK_HEAD, FAILED_TASK_TAIL = 10, 50
#: Seconds ``airflow db migrate`` may take (a minute or two on a loaded laptop) before the demo kills it and stops.
MIGRATE_TIMEOUT = 600.0


def register(sub: Any) -> None:
    """Add the ``demo`` command to the package CLI."""
    parser = sub.add_parser("demo", help="run the example retraining DAG against the offline endpoint")
    parser.add_argument("--workdir", type=Path, default=Path(".demo"), help="scratch directory (default: .demo)")
    parser.add_argument(
        "--dags-folder",
        type=Path,
        default=None,
        help="folder holding hetero_retraining_dag.py (default: the example DAGs the package ships)",
    )
    parser.add_argument("--rows", type=int, default=4000, help="training rows to generate (default 4000)")
    parser.add_argument(
        "--max-final-loss", type=float, default=None, help="override the DAG's gate (params.max_final_loss)"
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="print Airflow's own log here too (default: into WORKDIR/airflow.log)",
    )
    parser.set_defaults(handler=run)


@dataclass
class Terminal:
    """Where the demo's own lines go; ``log`` is the file holding Airflow's (None: the terminal)."""

    out: TextIO
    err: TextIO
    log: Path | None

    def step(self, message: str) -> None:
        self.say(f"==> {message}")

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def error(self, text: str) -> None:
        print(text, file=self.err, flush=True)


@contextlib.contextmanager
def terminal(log: Path | None) -> Iterator[Terminal]:
    """A :class:`Terminal`; with a ``log``, this process's stdout and stderr go to that file meanwhile.

    File descriptors 1 and 2 are redirected, not ``sys.stdout``: Airflow's log handlers hold the
    streams they were configured with, and child processes inherit the descriptors.
    """
    if log is None:
        yield Terminal(sys.stdout, sys.stderr, None)
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with (
        open(os.dup(saved[0]), "w", buffering=1, encoding="utf-8", errors="replace") as out,
        open(os.dup(saved[1]), "w", buffering=1, encoding="utf-8", errors="replace") as err,
        log.open("ab") as file,
    ):
        os.dup2(file.fileno(), 1)
        os.dup2(file.fileno(), 2)
        try:
            yield Terminal(out, err, log)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def find_dags_folder(given: Path | None) -> Path:
    """``--dags-folder``, else the example DAGs inside the installed package."""
    if given is None:
        from airflow_hetero import example_dags

        given = example_dags.folder()
    if not (given / DAG_FILE).is_file():
        raise SystemExit(f"airflow-hetero demo: {DAG_FILE} not found in {given}")
    return given.resolve()


def make_rows(count: int, seed: int = 7) -> list[tuple[float, float, float]]:
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        x1, x2 = rng.uniform(0, 10), rng.uniform(-5, 5)
        y = TRUE_WEIGHTS[0] * x1 + TRUE_WEIGHTS[1] * x2 + TRUE_BIAS + rng.gauss(0, NOISE)
        rows.append((x1, x2, y))
    return rows


def feature_stats(rows: list[tuple[float, float, float]]) -> dict[str, list[float]]:
    columns = list(zip(*[r[:2] for r in rows], strict=True))
    means = [sum(c) / len(c) for c in columns]
    stds = [(sum((v - m) ** 2 for v in c) / len(c)) ** 0.5 for c, m in zip(columns, means, strict=True)]
    return {"mean": means, "std": stds}


def seed_s3(s3: Any, rows: list[tuple[float, float, float]], day: str, parts: int = 4) -> list[str]:
    """Upload the week's raw CSV parts and the feature statistics; return the keys written."""
    s3.create_bucket(Bucket=BUCKET)
    keys = []
    for part in range(parts):
        buffer = io.StringIO()
        csv.writer(buffer).writerows(rows[part::parts])
        key = f"raw/{day}/part-{part:04d}.csv"
        s3.put_object(Bucket=BUCKET, Key=key, Body=buffer.getvalue().encode())
        keys.append(key)
    s3.put_object(Bucket=BUCKET, Key="config/features.json", Body=json.dumps(feature_stats(rows)).encode())
    keys.append("config/features.json")
    return keys


def airflow_environment(workdir: Path, dags_folder: Path, connection: str) -> dict[str, str]:
    home = workdir / "airflow-home"
    return {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW_CONN_AWS_DEFAULT": connection,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "HETERO_RETRAINING_POLL_SECONDS": "2",
    }


def load_dag(dags_folder: Path, file: str = DAG_FILE) -> Any:
    spec = importlib.util.spec_from_file_location(Path(file).stem, dags_folder / file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


def run_dag(dag: Any, conf: dict[str, Any]) -> Any:
    """``dag.test()`` for the demo's week: on Airflow 3 without a logical date (as a CLI/REST
    trigger does), on Airflow 2.11 with the week's end as the logical date."""
    from airflow_hetero._compat import AIRFLOW_V_3

    if AIRFLOW_V_3:
        return dag.test(run_after=RUN_AFTER, logical_date=None, run_conf=conf)
    dag.sync_to_db()  # Airflow 2.11's dag.test() records no dataset (asset) the DAG processor would
    return dag.test(execution_date=RUN_AFTER, run_conf=conf)


def task_states(dag_run: Any) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in sorted(dag_run.get_task_instances(), key=lambda ti: ti.task_id)}


def states_line(dag_run: Any) -> str:
    return "task states: " + ", ".join(f"{task}={state}" for task, state in task_states(dag_run).items())


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    from airflow_hetero.local.cli import EXIT_MISSING_EXTRA, missing_local_extra

    problem = missing_local_extra()
    if problem is not None:
        print(f"airflow-hetero demo: {problem}", file=sys.stderr)
        return EXIT_MISSING_EXTRA
    dags_folder = find_dags_folder(args.dags_folder)
    workdir = args.workdir.resolve()
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    with terminal(None if args.verbose else workdir / "airflow.log") as term:
        try:
            code = run_demo(args, term, dags_folder, workdir)
        except Exception:
            if term.log is not None:  # the traceback follows on the terminal, the context is in the log
                term.error(f"demo: stopped by the error below; Airflow's log up to it: {term.log}")
            raise
        if code == 0:
            term.step(f"demo succeeded in {time.monotonic() - started:.0f} s")
        return code


def run_demo(args: argparse.Namespace, term: Terminal, dags_folder: Path, workdir: Path) -> int:
    """The demo's steps, each announced on ``term``; the exit code."""
    from airflow_hetero.local import LocalEndpoint, RunOptions

    term.step(
        f"starting the offline SageMaker endpoint, no {NO_CAPACITY_TYPE} capacity (workdir {workdir / 'endpoint'})"
    )
    capacity = {NO_CAPACITY_TYPE: 0}
    with LocalEndpoint(
        workdir=workdir / "endpoint", run=RunOptions(metrics_interval=1.0), capacity=capacity
    ) as endpoint:
        term.say(f"    {endpoint.url}  (SageMaker, S3, CloudWatch Logs and metrics on one URL)")
        term.say(f"    the DAGs: {dags_folder}")
        if term.log is not None:
            term.say(f"    Airflow's own log goes to {term.log} (--verbose prints it here)")
        connection = json.dumps({"conn_type": "aws", "extra": endpoint.connection_extra()})
        env = airflow_environment(workdir, dags_folder, connection)
        os.environ.update(env)

        import boto3

        dag = load_dag(dags_folder)
        interval = dag.timetable.infer_manual_data_interval(run_after=RUN_AFTER)
        week = f"{interval.start:%Y-%m-%d}"
        s3 = boto3.client("s3", endpoint_url=endpoint.url, region_name="us-east-1")
        rows = make_rows(args.rows)
        keys = seed_s3(s3, rows, week)
        term.step(f"seeded s3://{BUCKET}/raw/{week}/: {len(rows)} rows in {len(keys) - 1} CSV parts, + {keys[-1]}")

        term.step("migrating a throwaway Airflow metadata DB (SQLite)")
        if not migrate_db(term):
            return 1

        term.step(f"running DAG hetero_retraining for the week {week} .. {interval.end:%Y-%m-%d} (dag.test)")
        conf = {} if args.max_final_loss is None else {"max_final_loss": args.max_final_loss}
        since = log_size(term)
        dag_run = run_dag(dag, conf)
        term.step(states_line(dag_run))
        print_summary(term, dag_run)
        if str(dag_run.state) != "success":
            return failed(term, "hetero_retraining", dag_run, workdir, since)

        term.step(f"the model asset {MODEL_ASSET} was updated: running DAG hetero_model_deploy, scheduled on it")
        since = log_size(term)
        deploy_run = run_dag(load_dag(dags_folder, DEPLOY_DAG_FILE), conf)
        term.step(states_line(deploy_run))
        if str(deploy_run.state) != "success":
            return failed(term, "hetero_model_deploy", deploy_run, workdir, since)
        manifest = json.loads(s3.get_object(Bucket=BUCKET, Key="deployed/manifest.json")["Body"].read())
        term.step(f"deployed s3://{BUCKET}/deployed/model.tar.gz from {manifest['training_job_name']}")
        term.say(
            f"    train:loss {manifest['train_loss']} (from the {manifest['loss_source']}); "
            f"groups: {', '.join(g['name'] for g in manifest['instance_groups'])}"
        )
        return 0


def migrate_db(term: Terminal, timeout: float = MIGRATE_TIMEOUT) -> bool:
    """``airflow db migrate`` in a subprocess; its output joins Airflow's log, its failure the terminal.

    Bounded: killed after ``timeout`` seconds, which the terminal is told (with its last output) as a failure.
    """
    try:
        migrate = subprocess.run(
            [sys.executable, "-m", "airflow", "db", "migrate"],
            check=False,
            capture_output=True,
            text=True,
            env=os.environ.copy(),
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        out, err = _text(exc.stdout), _text(exc.stderr)
        sys.stdout.write(out)
        sys.stderr.write(err)
        term.error("\n".join((out[-2000:], err[-4000:])))
        term.error(f"demo: `airflow db migrate` did not end within {timeout:.0f} s and was killed")
        return False
    sys.stdout.write(migrate.stdout)
    sys.stderr.write(migrate.stderr)
    if migrate.returncode != 0:
        term.error("\n".join((migrate.stdout[-2000:], migrate.stderr[-4000:])))
        term.error(f"demo: `airflow db migrate` failed; Airflow home: {os.environ['AIRFLOW_HOME']}")
    return migrate.returncode == 0


def _text(output: str | bytes | None) -> str:
    """What a timed-out child had written (``TimeoutExpired`` may carry bytes even in text mode)."""
    if isinstance(output, bytes):
        return output.decode("utf-8", "replace")
    return output or ""


def print_summary(term: Terminal, dag_run: Any) -> None:
    """The per-group table and the verdict the run's ``summarize`` task pushed, if it did."""
    summary = next(
        (ti.xcom_pull(task_ids="summarize") for ti in dag_run.get_task_instances() if ti.task_id == "summarize"),
        None,
    )
    if not summary or not isinstance(summary, dict):
        return
    from airflow_hetero.logs.report import format_report

    term.step("per-group summary")
    term.say(format_report(summary))


def log_size(term: Terminal) -> int:
    """How many bytes Airflow's log holds now (0 without one): a run's own lines start there."""
    sys.stdout.flush()
    sys.stderr.flush()
    return term.log.stat().st_size if term.log is not None else 0


def task_sections(log: str) -> dict[str, list[str]]:
    """The lines of each task in a ``dag.test()`` log, by task id (a task's last try wins)."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in log.splitlines():
        start = _TASK_START.search(line)
        if start is not None:
            current = sections[start.group(1)] = []
        elif any(marker in line for marker in _RUN_END):
            current = None
        if current is not None:
            current.append(line)
    return sections


def show_failed_tasks(term: Terminal, dag_run: Any, since: int) -> None:
    """Copy each failed task's log lines from Airflow's log to the terminal: its first lines (what
    ran) and its last (the error), the middle of a long one left out; the end of the run's log when
    no task's lines can be told apart."""
    assert term.log is not None
    sys.stdout.flush()
    sys.stderr.flush()
    with term.log.open("rb") as file:
        file.seek(since)
        text = file.read().decode("utf-8", errors="replace")
    sections = task_sections(text)
    failing = [task for task, state in task_states(dag_run).items() if state in ("failed", "up_for_retry")]
    shown = [(f"task {task}", sections[task]) for task in failing if sections.get(task)]
    for what, lines in shown or [("the run", text.splitlines()[-FAILED_TASK_TAIL:])]:
        cut = max(0, len(lines) - FAILED_TASK_HEAD - FAILED_TASK_TAIL)
        count = f"{len(lines)} lines" + (f", {cut} in the middle left out" if cut else "")
        term.error(f"demo: the log of {what} ({count}; all of Airflow's log: {term.log}):")
        head, tail = (lines[:FAILED_TASK_HEAD], lines[-FAILED_TASK_TAIL:]) if cut else (lines, [])
        term.error("\n".join([*head, *([f"... ({cut} lines)"] if cut else []), *tail]))


def failed(term: Terminal, dag_id: str, dag_run: Any, workdir: Path, since: int) -> int:
    if term.log is not None:
        show_failed_tasks(term, dag_run, since)
    where = "the task logs above" if term.log is None else f"the task's log above (all of it: {term.log})"
    term.error(
        f"demo: the {dag_id} run ended {dag_run.state}. Look at {where}, the job records and host "
        f"directories under {workdir / 'endpoint'}, and the Airflow home {os.environ['AIRFLOW_HOME']}."
    )
    return 1
