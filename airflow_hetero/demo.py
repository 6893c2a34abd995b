"""``airflow-hetero demo``: the example retraining DAG end to end, offline.

Starts the offline endpoint, seeds its S3 with a week of example data, runs the
``hetero_retraining`` DAG with ``dag.test()`` against a throwaway SQLite Airflow home (on Airflow 3
as a manual run without a logical date), prints the per-group summary the DAG produced, then runs
``hetero_model_deploy``, the DAG scheduled on the model asset the first one updated. No AWS
account, no containers.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import io
import json
import os
import random
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BUCKET = "airflow-hetero-demo"
MODEL_ASSET = f"s3://{BUCKET}/models"
DAG_FILE = "hetero_retraining_dag.py"
DEPLOY_DAG_FILE = "hetero_model_deploy_dag.py"
#: When the demo's weekly run happens; it trains on the data interval that ends then.
RUN_AFTER = datetime(2026, 11, 29, tzinfo=UTC)
TRUE_WEIGHTS, TRUE_BIAS, NOISE = (3.0, -2.0), 0.5, 0.1


def register(sub: Any) -> None:
    """Add the ``demo`` command to the package CLI."""
    parser = sub.add_parser("demo", help="run the example retraining DAG against the offline endpoint")
    parser.add_argument("--workdir", type=Path, default=Path(".demo"), help="scratch directory (default: .demo)")
    parser.add_argument("--dags-folder", type=Path, default=None, help="folder holding hetero_retraining_dag.py")
    parser.add_argument("--rows", type=int, default=4000, help="training rows to generate (default 4000)")
    parser.add_argument(
        "--max-final-loss", type=float, default=None, help="override the DAG's gate (params.max_final_loss)"
    )
    parser.set_defaults(handler=run)


def step(message: str) -> None:
    print(f"==> {message}", flush=True)


def find_dags_folder(given: Path | None) -> Path:
    candidates = [given] if given else [Path.cwd() / "dags", Path(__file__).resolve().parent.parent / "dags"]
    for folder in candidates:
        if folder is not None and (folder / DAG_FILE).is_file():
            return folder.resolve()
    raise SystemExit(f"demo: {DAG_FILE} not found in {', '.join(str(c) for c in candidates)}; run from a clone")


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


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    dags_folder = find_dags_folder(args.dags_folder)
    workdir = args.workdir.resolve()
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)

    from airflow_hetero.local import LocalEndpoint

    step(f"starting the offline SageMaker endpoint (workdir {workdir / 'endpoint'})")
    with LocalEndpoint(workdir=workdir / "endpoint", metrics_interval=1.0) as endpoint:
        print(f"    {endpoint.url}  (SageMaker, S3, CloudWatch Logs and metrics on one URL)", flush=True)
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
        step(f"seeded s3://{BUCKET}/raw/{week}/: {len(rows)} rows in {len(keys) - 1} CSV parts, + config/features.json")

        step("migrating a throwaway Airflow metadata DB (SQLite)")
        migrate = subprocess.run(
            [sys.executable, "-m", "airflow", "db", "migrate"],
            check=False,
            capture_output=True,
            text=True,
            env=os.environ.copy(),
        )
        if migrate.returncode != 0:
            print(migrate.stdout[-2000:], migrate.stderr[-4000:], sep="\n", file=sys.stderr)
            print(f"demo: `airflow db migrate` failed; Airflow home: {env['AIRFLOW_HOME']}", file=sys.stderr)
            return 1

        step(f"running DAG hetero_retraining for the week {week} .. {interval.end:%Y-%m-%d} (dag.test)")
        conf = {} if args.max_final_loss is None else {"max_final_loss": args.max_final_loss}
        dag_run = run_dag(dag, conf)
        summary = next(
            (ti.xcom_pull(task_ids="summarize") for ti in dag_run.get_task_instances() if ti.task_id == "summarize"),
            None,
        )
        step("task states: " + ", ".join(f"{task}={state}" for task, state in task_states(dag_run).items()))
        if summary:
            from airflow_hetero.logs.table import format_table

            step("per-group summary")
            print(format_table(summary), flush=True)
        if str(dag_run.state) != "success":
            return failed("hetero_retraining", dag_run, workdir, env)

        step(f"the model asset {MODEL_ASSET} was updated: running DAG hetero_model_deploy, scheduled on it")
        deploy_run = run_dag(load_dag(dags_folder, DEPLOY_DAG_FILE), conf)
        step("task states: " + ", ".join(f"{task}={state}" for task, state in task_states(deploy_run).items()))
        if str(deploy_run.state) != "success":
            return failed("hetero_model_deploy", deploy_run, workdir, env)
        manifest = json.loads(s3.get_object(Bucket=BUCKET, Key="deployed/manifest.json")["Body"].read())
        step(f"deployed s3://{BUCKET}/deployed/model.tar.gz from {manifest['training_job_name']}")
        print(
            f"    train:loss {manifest['train_loss']} (from the {manifest['loss_source']}); "
            f"groups: {', '.join(g['name'] for g in manifest['instance_groups'])}",
            flush=True,
        )
        step(f"demo succeeded in {time.monotonic() - started:.0f} s")
        return 0


def failed(dag_id: str, dag_run: Any, workdir: Path, env: dict[str, str]) -> int:
    print(
        f"demo: the {dag_id} run ended {dag_run.state}. Look at the task logs above, the job records and host "
        f"directories under {workdir / 'endpoint'}, and the Airflow home {env['AIRFLOW_HOME']}.",
        file=sys.stderr,
    )
    return 1
