"""The Runs view's CPU cost: building the rows and the headline of 30 runs from their XComs and rendering the page.

The runs are :mod:`benchmarks.runs_data`'s (a weekly retraining with every marker; each summary keeps its 60-point
series, as XCom holds them). Each round times, in CPU seconds of this process (``time.process_time``), what the
view does after its one query: :func:`~airflow_hetero.plugins.runs_history.run_history` (pair the tasks, one row
per run, the headline) and :func:`~airflow_hetero.plugins.runs_page.render_runs_page`. The database read is left
out: it is Airflow's (two statements, tests/cli/test_runs_cli.py); what decoding the runs' XCom values as JSON
costs (Airflow does it while reading) is printed beside, for scale. The bound is 200 ms for 30 runs (issue 37); the
figure is the median of the rounds, with the fastest and slowest.

    python -m benchmarks.runs_page [--rounds 15] [--runs 30]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from airflow_hetero.plugins.runs_history import run_history
from airflow_hetero.plugins.runs_page import render_runs_page
from benchmarks.runs_data import retraining_runs

#: CPU seconds the view may spend on 30 runs.
BOUND_SECONDS = 0.2
PARAMS = {"dag_id": "hetero_retraining", "task_id": "train"}


def one_round(count: int) -> float:
    """CPU seconds to model and render ``count`` runs once."""
    runs = retraining_runs(count)  # built outside the timing: XCom's deserialised values
    started = time.process_time()
    history = run_history("hetero_retraining", "train", runs, limit=count)
    render_runs_page(history, where="DAG hetero_retraining, task train", params=PARAMS)
    return time.process_time() - started


def decoding(count: int) -> tuple[float, int]:
    """(CPU seconds to decode the XCom values of ``count`` runs from JSON, their size in bytes)."""
    texts = [json.dumps(value) for run in retraining_runs(count) for value in run.values.values()]
    started = time.process_time()
    for text in texts:
        json.loads(text)
    return time.process_time() - started, sum(len(t) for t in texts)


def benchmark(rounds: int = 15, count: int = 30) -> float:
    """Print the rounds' median, fastest and slowest; return the median (CPU seconds)."""
    one_round(count)  # imports and first-call costs stay out of the figure
    times = sorted(one_round(count) for _ in range(rounds))
    median = statistics.median(times)
    print(
        f"Runs view, {count} runs (model + render, CPU): median {median * 1000:.1f} ms over {rounds} rounds "
        f"(fastest {times[0] * 1000:.1f} ms, slowest {times[-1] * 1000:.1f} ms); bound {BOUND_SECONDS * 1000:.0f} ms"
    )
    decoded = sorted(decoding(count) for _ in range(rounds))
    seconds, size = decoded[len(decoded) // 2]
    print(f"  for scale: decoding their XCom values from JSON ({size / 1024:.0f} KB) takes {seconds * 1000:.1f} ms")
    return median


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args(argv)
    return 0 if benchmark(args.rounds, args.runs) <= BOUND_SECONDS * args.runs / 30 else 1


if __name__ == "__main__":
    raise SystemExit(main())
