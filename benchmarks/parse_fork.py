"""DAG-parse cost as Airflow 3's DAG processor pays it: pre-import ``airflow.*`` in the parent, fork per parse.

Each variant gets its own long-lived parent process that imports ``airflow.dag_processing.processor``
and calls the processor's own ``_pre_import_airflow_modules`` on the file (what the real processor
does before it forks a parser); each parse is then a forked child that runs the processor's own
``_parse_file`` (DagBag, import errors, serialization) and exits. The child's CPU time comes from
``os.wait4``'s rusage.
Variants run interleaved, round after round, so noise hits all alike; the ratio is the median
over rounds of (variant CPU / EmptyOperator CPU) in the same round.

Variants: the same DAG with an ``EmptyOperator`` (baseline), with ``HeteroTrainingOperator(job=dict)``
(its definition validated at parse time), with ``HeteroTrainingOperator(request=dict)`` (the same job as
a CreateTrainingJob request, validated at parse time in request mode), with a minimal third-party
operator taking the same dict (``benchmarks/reference_operator.py``: what any operator of its own module
pays, no validation) and with the Amazon provider's ``SageMakerTrainingOperator`` given the same job as its
``config`` (the request). The provider's module is an ``airflow.*`` module, so the processor's parent
pre-imports it; the ``preloaded`` variants give ours the same start: their parent imports the operator's
module once before forking, as one line in ``airflow_local_settings.py`` does (docs/deployment.md,
"Parsing DAG files faster").

    python -m benchmarks.parse_fork [--rounds 25]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.import_cost import DEFINITION

HEAD = "from airflow.sdk import DAG\n"
#: DEFINITION's job as the CreateTrainingJob request its definition becomes (request mode).
REQUEST = """{
    "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
    "AlgorithmSpecification": {
        "TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:1.12-gpu-py38",
        "TrainingInputMode": "File",
    },
    "HyperParameters": {
        "sagemaker_program": '"train.py"', "sagemaker_submit_directory": '"s3://my-bucket/code/sourcedir.tar.gz"',
        "sagemaker_distribution_instance_groups": '["instance_group_2"]', "sagemaker_mpi_enabled": "true",
        "sagemaker_mpi_num_of_processes_per_host": "8",
    },
    "InputDataConfig": [
        {"ChannelName": "training", "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix",
         "S3Uri": "s3://my-bucket/train", "InstanceGroupNames": ["instance_group_2"]}}},
        {"ChannelName": "dataset", "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix",
         "S3Uri": "s3://my-bucket/dataset", "InstanceGroupNames": ["instance_group_1"]}}},
    ],
    "OutputDataConfig": {"S3OutputPath": "s3://my-bucket/output"},
    "ResourceConfig": {"VolumeSizeInGB": 30, "InstanceGroups": [
        {"InstanceGroupName": "instance_group_1", "InstanceType": "ml.c5.18xlarge", "InstanceCount": 2},
        {"InstanceGroupName": "instance_group_2", "InstanceType": "ml.p3dn.24xlarge", "InstanceCount": 1},
    ]},
    "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
}"""
VARIANTS = {
    "EmptyOperator (baseline)": HEAD
    + """from airflow.providers.standard.operators.empty import EmptyOperator
with DAG("bench", schedule=None) as dag:
    EmptyOperator(task_id="train")
""",
    "HeteroTrainingOperator(job=dict)": HEAD
    + f"""from airflow_hetero.operators import HeteroTrainingOperator
with DAG("bench", schedule=None) as dag:
    HeteroTrainingOperator(task_id="train", job={DEFINITION})
""",
    "HeteroTrainingOperator(request=dict)": HEAD
    + f"""from airflow_hetero.operators import HeteroTrainingOperator
with DAG("bench", schedule=None) as dag:
    HeteroTrainingOperator(task_id="train", request={REQUEST})
""",
    "Minimal DictOperator(job=dict)": HEAD
    + f"""from benchmarks.reference_operator import DictOperator
with DAG("bench", schedule=None) as dag:
    DictOperator(task_id="train", job={DEFINITION})
""",
    "Amazon SageMakerTrainingOperator": HEAD
    + f"""from airflow.providers.amazon.aws.operators.sagemaker import SageMakerTrainingOperator
with DAG("bench", schedule=None) as dag:
    SageMakerTrainingOperator(task_id="train", config={{"TrainingJobName": "bench", **{REQUEST}}})
""",
}
#: What ``airflow_local_settings.py`` imports for the preloaded variants (the line docs/deployment.md gives).
PRELOAD = "airflow_hetero.operators.training"
VARIANTS["HeteroTrainingOperator(job=dict), preloaded"] = VARIANTS["HeteroTrainingOperator(job=dict)"]
VARIANTS["HeteroTrainingOperator(request=dict), preloaded"] = VARIANTS["HeteroTrainingOperator(request=dict)"]


def _parser_process(path: str, preload: bool) -> None:
    """A processor parent for one DAG file: pre-import its ``airflow.*`` modules (and, ``preload``, the
    operator's module), fork per request.

    Reads one line per parse on stdin; prints the forked child's CPU seconds (or ``error``).
    Each variant gets its own parent, so one variant's pre-imports never help another.
    """
    import importlib

    import structlog

    if preload:
        importlib.import_module(PRELOAD)
    from airflow.dag_processing.processor import DagFileParseRequest, _parse_file, _pre_import_airflow_modules

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    log = structlog.get_logger("bench")
    _pre_import_airflow_modules(path, log)
    request = DagFileParseRequest(file=path, bundle_path=Path(path).parent, bundle_name="bench")
    for _ in sys.stdin:
        pid = os.fork()
        if pid == 0:  # the child: what the processor's parser process does
            code = 0
            try:
                result = _parse_file(request, log)
                if result is None or result.import_errors or len(result.serialized_dags) != 1:
                    code = 3
            except BaseException:
                code = 4
            os._exit(code)
        _, status, usage = os.wait4(pid, 0)
        ok = os.waitstatus_to_exitcode(status) == 0
        print(usage.ru_utime + usage.ru_stime if ok else "error", flush=True)


def compile_package() -> None:
    """Write the bytecode of the package and of the reference operator, as pip does when it installs a wheel.

    An editable install under ``PYTHONDONTWRITEBYTECODE=1`` (set on these machines) would
    otherwise compile every module from source in every parse, which no deployment pays. The
    reference operator (``benchmarks/``) is compiled too: compiled from source in every parse it
    looked dearer than it is, and the package's cost above it smaller.
    """
    import compileall

    import airflow_hetero

    for folder in (Path(airflow_hetero.__file__).parent, Path(__file__).parent):
        compileall.compile_dir(str(folder), quiet=1)


def measure(rounds: int) -> dict[str, list[float]]:
    """CPU seconds per parse, per variant, ``rounds`` interleaved rounds (after one warm-up)."""
    compile_package()
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        parents: dict[str, subprocess.Popen[str]] = {}
        try:
            for i, (name, source) in enumerate(VARIANTS.items()):
                path = Path(tmp) / f"bench_dag_{i}.py"
                path.write_text(source, encoding="utf-8")
                preload = ["--preload"] if name.endswith(", preloaded") else []
                parents[name] = subprocess.Popen(
                    [sys.executable, "-m", "benchmarks.parse_fork", "--parent", str(path), *preload],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
            for round_no in range(rounds + 1):
                for name, parent in parents.items():
                    assert parent.stdin is not None and parent.stdout is not None
                    parent.stdin.write("parse\n")
                    parent.stdin.flush()
                    answer = parent.stdout.readline().strip()
                    if answer in ("", "error"):
                        raise RuntimeError(f"parsing the {name!r} file failed")
                    if round_no:  # round 0 warms caches (.pyc files, the file system)
                        times[name].append(float(answer))
        finally:
            for parent in parents.values():
                if parent.stdin:
                    parent.stdin.close()
                parent.wait(timeout=30)
    return times


#: The variant the targets compare with (issue 35: ``job=`` and ``request=`` within 0.05 of it, preloaded 0.015).
PROVIDER = "Amazon SageMakerTrainingOperator"


def report(times: dict[str, list[float]]) -> dict[str, float]:
    """Print medians, per-round ratios against the baseline and, per round, the distance from the provider's
    operator in baseline parses; return the ratios."""
    names = list(times)
    base, provider = times[names[0]], times[PROVIDER]
    ratios: dict[str, float] = {}
    print(f"{'variant':48} {'CPU ms (median)':>16} {'x baseline':>11} {'- provider':>11}   (medians of rounds)")
    for name in names:
        ratio = statistics.median(t / b for t, b in zip(times[name], base, strict=True))
        over = statistics.median((t - p) / b for t, p, b in zip(times[name], provider, base, strict=True))
        ratios[name] = ratio
        print(f"{name:48} {statistics.median(times[name]) * 1000:16.1f} {ratio:11.3f} {over:+11.3f}")
    return ratios


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--parent", help=argparse.SUPPRESS)  # internal: run one processor parent
    parser.add_argument("--preload", action="store_true", help=argparse.SUPPRESS)  # internal: its parent preloads
    args = parser.parse_args(argv)
    if args.parent:
        _parser_process(args.parent, args.preload)
        return 0
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    print(f"DAG parse in the fork model: {args.rounds} rounds, CPU of each forked parse")
    report(measure(args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
