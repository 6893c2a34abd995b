"""Hostile definition files: time and peak memory of ``airflow-hetero validate`` refusing each.

Each file is written to a temporary folder and validated by the real console entry point in its
own Python process; the table shows wall time (median of rounds), the process's peak RSS, the
exit status and the one line printed. The baseline is the same command on a small valid
definition, measured in the same run, so the "x baseline" column says what a hostile file costs
beyond starting the CLI.

    python -m benchmarks.hostile_definitions [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HEAD = """role: arn:aws:iam::123456789012:role/SageMakerRole
image_uri: 123456789012.dkr.ecr.us-east-1.amazonaws.com/train:latest
output_path: s3://bucket/output
instance_groups:
  - {instance_group_name: data_group, instance_type: ml.c5.xlarge, instance_count: 2}
  - {instance_group_name: dnn_group, instance_type: ml.p3.2xlarge, instance_count: 1}
"""


def valid() -> str:
    """A small valid definition (the baseline)."""
    return HEAD + "hyperparameters: {epochs: 10}\n"


def anchor_bomb(section: str = "hyperparameters", size: int = 926) -> str:
    """Nine levels of nine aliases each under ``section`` (9**9, 387 million values once expanded),
    padded with a comment to ``size`` bytes (the size of the file in the issue report)."""
    lines = [HEAD.rstrip("\n"), f"{section}:", '  a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, 9):
        refs = ",".join([f"*a{level - 1}"] * 9)
        lines.append(f"  a{level}: &a{level} [{refs}]")
    text = "\n".join(lines) + "\n"
    return text + "#" * max(0, size - len(text) - 1) + "\n" if len(text) < size else text


def big_file(megabytes: int = 61) -> str:
    """A ``megabytes`` MB file of hyperparameters (one short line each)."""
    line = "  key_{:08d}: value_value_value_value_value_value\n"
    count = megabytes * 1024 * 1024 // len(line.format(0))
    return HEAD + "hyperparameters:\n" + "".join(line.format(i) for i in range(count))


def deep_nesting(levels: int = 500) -> str:
    """A hyperparameter value nested ``levels`` lists deep."""
    return HEAD + "hyperparameters:\n  deep: " + "[" * levels + "1" + "]" * levels + "\n"


def long_integer(digits: int = 5000) -> str:
    """A hyperparameter holding a ``digits``-digit integer."""
    return HEAD + "hyperparameters:\n  epochs: " + "9" * digits + "\n"


def deep_json(levels: int = 500) -> str:
    """The JSON form of :func:`deep_nesting`."""
    return '{"hyperparameters": {"deep": ' + "[" * levels + "1" + "]" * levels + "}}"


CASES: dict[str, tuple[str, Callable[[], str]]] = {
    "valid definition (baseline)": ("valid.yaml", valid),
    "926-byte anchor bomb (hyperparameters)": ("bomb.yaml", anchor_bomb),
    "anchor bomb in tags": ("bomb-tags.yaml", lambda: anchor_bomb("tags")),
    "anchor bomb in distribution": ("bomb-dist.yaml", lambda: anchor_bomb("distribution")),
    "61 MB file": ("big.yaml", big_file),
    "500-deep nesting (YAML)": ("deep.yaml", deep_nesting),
    "500-deep nesting (JSON)": ("deep.json", deep_json),
    "5,000-digit integer": ("int.yaml", long_integer),
}

# Peak RSS from /proc (VmHWM): getrusage's ru_maxrss survives execve, so a child started by a
# large parent would report the parent's peak.
_RUNNER = """
import sys, time
from airflow_hetero.cli import main
start = time.perf_counter()
code = main(["validate", sys.argv[1]])
elapsed = time.perf_counter() - start
with open("/proc/self/status") as status:
    peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
print(f"@@ {code} {elapsed:.6f} {peak}", file=sys.stderr)
"""


def run_once(path: Path) -> tuple[int, float, int, str]:
    """(exit status, seconds inside main(), peak RSS in KiB, first stderr line) of one validate run."""
    proc = subprocess.run(
        [sys.executable, "-c", _RUNNER, str(path)], check=False, capture_output=True, text=True, timeout=600
    )
    lines = proc.stderr.strip().splitlines()
    stats = next((line for line in lines if line.startswith("@@ ")), None)
    if stats is None:
        raise RuntimeError(f"validate of {path} crashed: {proc.stderr[-2000:]}")
    _, code, seconds, rss = stats.split()
    message = next((line for line in lines if not line.startswith("@@ ")), proc.stdout.strip())
    return int(code), float(seconds), int(rss), message


def benchmark(rounds: int = 3) -> dict[str, dict[str, object]]:
    """Measure every case ``rounds`` times; medians of time and peak memory per case."""
    results: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for label, (filename, make) in CASES.items():
            path = Path(tmp) / filename
            path.write_text(make(), encoding="utf-8")
            paths[label] = path
        samples: dict[str, list[tuple[int, float, int, str]]] = {label: [] for label in CASES}
        for _ in range(rounds):
            for label, path in paths.items():
                samples[label].append(run_once(path))
        for label, runs in samples.items():
            results[label] = {
                "bytes": paths[label].stat().st_size,
                "exit": runs[0][0],
                "seconds": statistics.median(r[1] for r in runs),
                "peak_rss_mib": statistics.median(r[2] for r in runs) / 1024,
                "message": runs[0][3],
            }
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    results = benchmark(args.rounds)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    base = results["valid definition (baseline)"]
    print(f"Hostile definition files, `airflow-hetero validate`, median of {args.rounds} runs each")
    print(f"{'case':42} {'bytes':>10} {'exit':>4} {'s in main()':>11} {'x baseline':>10} {'peak RSS MiB':>12}")
    for label, row in results.items():
        ratio = float(row["seconds"]) / max(float(base["seconds"]), 1e-9)  # type: ignore[arg-type]
        print(
            f"{label:42} {row['bytes']:>10} {row['exit']:>4} {row['seconds']:>11.4f} {ratio:>10.2f} "
            f"{row['peak_rss_mib']:>12.1f}"
        )
    for label, row in results.items():
        print(f"  {label}: {str(row['message'])[:200]}")
    print(f"(total {time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
