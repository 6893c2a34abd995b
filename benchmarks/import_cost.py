"""DAG-parse cost: what airflow-hetero adds to a DAG file that imports only ``airflow.sdk``.

Each variant is a small DAG file run as its own Python process (what a DAG-file processor pays
for a fresh parse); the variants run interleaved, round after round, so machine noise hits all
of them alike, and medians are compared with the baseline of the same run: the definition with
a DAG that has no task, the operator with the same DAG holding a plain ``BaseOperator`` task
(creating the first task of a DAG costs the same whatever the operator). Whole-process times of
near-identical files still differ by a few percent on a shared machine, so the first table
times, inside each parse, only the code after ``airflow.sdk`` is imported, and reports what a
variant adds as a share of a whole parse.

    python -m benchmarks.import_cost [--rounds 15]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFINITION = """{
    "role": "arn:aws:iam::123456789012:role/SageMakerRole",
    "output_path": "s3://my-bucket/output",
    "framework": "pytorch", "framework_version": "1.12", "py_version": "py38",
    "entry_point": "train.py", "source_dir": "s3://my-bucket/code/sourcedir.tar.gz",
    "instance_groups": [
        {"instance_group_name": "instance_group_1", "instance_type": "ml.c5.18xlarge", "instance_count": 2},
        {"instance_group_name": "instance_group_2", "instance_type": "ml.p3dn.24xlarge", "instance_count": 1},
    ],
    "distribution": {"mpi": {"enabled": True, "processes_per_host": 8}, "instance_groups": ["instance_group_2"]},
    "inputs": {
        "training": {"s3_data": "s3://my-bucket/train", "instance_groups": ["instance_group_2"]},
        "dataset": {"s3_data": "s3://my-bucket/dataset", "instance_groups": ["instance_group_1"]},
    },
}"""

VARIANTS = {
    "airflow.sdk only, no task (baseline A)": """
from airflow.sdk import DAG
with DAG("bench", schedule=None) as dag:
    pass
""",
    "A + build a definition (airflow_hetero.definition.job)": f"""
from airflow.sdk import DAG
from airflow_hetero.definition.job import load_job
job = load_job({DEFINITION})
with DAG("bench", schedule=None) as dag:
    pass
""",
    "airflow.sdk only, one plain task (baseline B)": """
from airflow.sdk import DAG, BaseOperator
class Plain(BaseOperator):
    def execute(self, context):
        return None
with DAG("bench", schedule=None) as dag:
    Plain(task_id="train")
""",
    "B's task as HeteroTrainingOperator (airflow_hetero.operators)": f"""
from airflow.sdk import DAG
from airflow_hetero.operators import HeteroTrainingOperator
with DAG("bench", schedule=None) as dag:
    HeteroTrainingOperator(task_id="train", job={DEFINITION})
""",
    "B's task as the Amazon provider's SageMakerTrainingOperator": """
from airflow.sdk import DAG
from airflow.providers.amazon.aws.operators.sagemaker import SageMakerTrainingOperator
with DAG("bench", schedule=None) as dag:
    SageMakerTrainingOperator(task_id="train", config={})
""",
}
#: Which baseline each variant is compared with (the first one of its group).
BASELINE_OF = {
    "A + build a definition (airflow_hetero.definition.job)": "airflow.sdk only, no task (baseline A)",
    "B's task as HeteroTrainingOperator (airflow_hetero.operators)": "airflow.sdk only, one plain task (baseline B)",
    "B's task as the Amazon provider's SageMakerTrainingOperator": "airflow.sdk only, one plain task (baseline B)",
}


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def instrumented(code: str) -> str:
    """The DAG file, printing the seconds it spends after ``airflow.sdk`` is imported."""
    head, sdk_import, rest = code.partition("from airflow.sdk import")
    line, _, body = rest.partition("\n")
    return (
        f"{head}{sdk_import}{line}\nimport time as _bench_time\n_bench_start = _bench_time.perf_counter()\n"
        f"{body}\nprint(_bench_time.perf_counter() - _bench_start)\n"
    )


def run(rounds: int) -> tuple[dict[str, list[float]], dict[str, list[float]], dict[str, list[float]]]:
    """Per variant: wall and CPU seconds of each whole parse, and seconds spent after airflow.sdk."""
    wall: dict[str, list[float]] = {name: [] for name in VARIANTS}
    cpu: dict[str, list[float]] = {name: [] for name in VARIANTS}
    after_sdk: dict[str, list[float]] = {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for index, (name, code) in enumerate(VARIANTS.items()):
            path = Path(tmp) / f"dag_{index}.py"
            path.write_text(instrumented(code))
            files[name] = path
        for path in files.values():  # warm the OS cache, and fail loudly if a variant is broken
            subprocess.run([sys.executable, str(path)], check=True, capture_output=True)
        for _ in range(rounds):
            for name, path in files.items():
                start, cpu_start = time.perf_counter(), _cpu_children()
                proc = subprocess.run([sys.executable, str(path)], check=True, capture_output=True, text=True)
                wall[name].append(time.perf_counter() - start)
                cpu[name].append(_cpu_children() - cpu_start)
                after_sdk[name].append(float(proc.stdout.strip().splitlines()[-1]))
    return wall, cpu, after_sdk


def report_added(after_sdk: dict[str, list[float]], wall: dict[str, list[float]]) -> None:
    """What each variant's own code costs beyond its baseline's, as a share of a whole parse.

    Timed inside each process around the code that differs, so other load on the machine
    barely moves it (whole-process medians of identical files differ by a few percent here).
    """
    print(f"{'variant':64} {'added ms':>9} {'of a parse':>11}")
    for name, base in BASELINE_OF.items():
        added = statistics.median(after_sdk[name]) - statistics.median(after_sdk[base])
        share = added / statistics.median(wall[base])
        print(f"{name:64} {added * 1000:9.1f} {share:+10.1%}")


def report(times: dict[str, list[float]], unit: str) -> list[tuple[str, float, float]]:
    rows = []
    print(f"{'variant':64} {'median ' + unit:>12} {'vs its baseline':>16}")
    for name, values in times.items():
        median = statistics.median(values)
        base = statistics.median(times[BASELINE_OF.get(name, name)])
        ratio = median / base - 1
        rows.append((name, median, ratio))
        shown = f"{ratio:+15.1%}" if name in BASELINE_OF else f"{'(baseline)':>15}"
        print(f"{name:64} {median:12.3f} {shown}")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args(argv)
    print(f"DAG-parse cost, {args.rounds} interleaved rounds, one fresh process per parse")
    wall, cpu, after_sdk = run(args.rounds)
    print("\nadded by the package, timed inside each parse after `airflow.sdk` is imported (medians):")
    report_added(after_sdk, wall)
    print("\nwall time (what a DAG processor waits for):")
    report(wall, "wall s")
    print("\nCPU time, user + system (less sensitive to other load on the machine):")
    report(cpu, "CPU s")
    print("goal: each airflow-hetero variant adds at most 3% to the baseline")
    return 0


if __name__ == "__main__":
    sys.exit(main())
