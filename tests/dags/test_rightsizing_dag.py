"""Right-sizing end to end on the offline endpoint: a DAG run over successive logical dates (as the scheduler
would) under ``dag.test()``, its training task in ``apply`` mode, its summary recording each run.

The training script (``pipeline.py`` below) is a data group feeding a training group: ``batches`` batches, a
data host prepares one in ``prep_seconds``, the trainer trains on one in ``train_seconds``; the data hosts
share the batches. The run lasts ``batches x max(prep / n, train)`` seconds and each host keeps its CPU busy
for its own work's share of it (at most ``duty``, a quarter of a core: the endpoint's hosts share the
machine's cores, and the verdict's thresholds below are the defaults scaled by the same quarter). So the
utilisation the summary reads from the endpoint's CloudWatch really follows the data group's count:

* ``starved``: prep 6 x train. 1 data host: trainer 17% of its quarter, waiting; 2: 33%, waiting; 4: 67%,
  busy. The task grows the data group 1 -> 2 -> 4 (one step at most doubles) and stops where the verdict holds
  the count. The hosts' figures are noisy on a shared machine (a trainer at 2 data hosts measured 10 to 14 %):
  the verdict may then ask for 3 at 2, and at 3 (12.5 % and the noise, around the 15 % waiting threshold) for
  more or for nothing, run by run; the test holds what stays true: growth one step at a time, each after two
  agreeing runs, up to a count the verdict calls balanced, never past the 6 that fully feed the trainer.
* ``over``: prep = train, 4 data hosts each busy a quarter of the time: over-provisioned; 2 would do. The
  task shrinks 4 -> 2 and stays.
"""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pendulum
import pytest
from support.dag_files import dag_file

from airflow_hetero.local import LocalEndpoint

pytestmark = pytest.mark.slow

BUCKET = "rightsizing-dag"
START = pendulum.datetime(2026, 3, 1, tz="UTC")
SCRIPT = '''\
"""A data group feeding a training group: the slower group sets the pace, the other waits."""
import time

from airflow_hetero import runtime

env = runtime.environment()
hp = env.hyperparameters
batches, duty = int(hp["batches"]), float(hp["duty"])
prep, train = float(hp["prep_seconds"]), float(hp["train_seconds"])
data_hosts = len(env.group_hosts("data_group"))
run = batches * max(prep / data_hosts, train)
own = batches * prep / data_hosts if env.current_instance_group == "data_group" else batches * train
share = duty * own / run  # of one core, over the run
began, cpu = time.monotonic(), time.process_time()
while (elapsed := time.monotonic() - began) < run:
    if time.process_time() - cpu < share * elapsed:
        mark = time.process_time()
        while time.process_time() - mark < 0.005:
            pass
    else:
        time.sleep(0.005)
print(f"{env.current_instance_group}: {data_hosts} data host(s), run {run:.2f} s, busy {share:.0%}", flush=True)
'''
DAG_FILE = textwrap.dedent(
    f'''
    """Two DAGs whose training task right-sizes its data group (apply mode)."""
    import pendulum

    from airflow.providers.common.compat.sdk import DAG
    from airflow_hetero.operators import HeteroLogSummaryOperator, HeteroTrainingOperator

    QUARTER = 0.25  # of a core: the hosts' duty, and the scale of the verdict's thresholds
    THRESHOLDS = {{
        "busy_percent": 18, "waiting_percent": 15, "idle_percent": 2.5,
        "over_provisioned_percent": 12.5, "target_percent": 20,
    }}
    ONE_CORE = {{"ml.c5.xlarge": {{"cpus": 1}}, "ml.g5.xlarge": {{"cpus": 1, "gpus": 1}}}}


    def job(data_count, prep, train):
        return {{
            "role": "arn:aws:iam::123456789012:role/SageMakerRole",
            "framework": "pytorch",
            "framework_version": "2.0",
            "py_version": "py310",
            "entry_point": "pipeline.py",
            "source_dir": "rightsizing_code",
            "output_path": "s3://{BUCKET}/models",
            "base_job_name": "rightsize",
            "instance_groups": [
                {{"instance_group_name": "data_group", "instance_type": "ml.c5.xlarge", "instance_count": data_count}},
                {{"instance_group_name": "train_group", "instance_type": "ml.g5.xlarge", "instance_count": 1}},
            ],
            "hyperparameters": {{"batches": 40, "prep_seconds": prep, "train_seconds": train, "duty": QUARTER}},
            "max_run": 600,
        }}


    for name, data_count, prep, train in (("starved", 1, 0.3, 0.05), ("over", 4, 0.1, 0.1)):
        with DAG(
            "rightsizing_" + name,
            schedule="@daily",
            start_date=pendulum.datetime(2026, 3, 1, tz="UTC"),
            catchup=False,
            default_args={{"retries": 0}},
        ) as dag:
            HeteroTrainingOperator(
                task_id="train",
                job=job(data_count, prep, train),
                check_interval=0.5,
                rightsizing={{
                    "groups": {{"data_group": {{"min_count": 1, "max_count": 8}}}},
                    "mode": "apply",
                    "tolerance": 0.25,  # runs of a few seconds on a shared machine differ by a second
                }},
            ) >> HeteroLogSummaryOperator(
                task_id="summarize",
                training_task_id="train",
                trigger_rule="all_done",
                verdict_thresholds=THRESHOLDS,
                capacity_overrides=ONE_CORE,
            )
        globals()[dag.dag_id] = dag
    '''
)


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalEndpoint]:
    with LocalEndpoint(workdir=tmp_path_factory.mktemp("endpoint"), metrics_interval=0.3) as ep:
        ep.client("s3").create_bucket(Bucket=BUCKET)
        yield ep


@pytest.fixture
def dag_module(airflow_db: None, endpoint: LocalEndpoint, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from airflow.configuration import conf

    monkeypatch.setenv("AIRFLOW_CONN_AWS_DEFAULT", endpoint.airflow_connection_json())
    folder = Path(conf.get("core", "dags_folder"))
    (folder / "rightsizing_code").mkdir(parents=True, exist_ok=True)
    (folder / "rightsizing_code" / "pipeline.py").write_text(SCRIPT)
    with dag_file("rightsizing_dags", DAG_FILE) as module:
        yield module


def run_days(dag: Any, most: int, endpoint: LocalEndpoint) -> list[dict[str, Any]]:
    """Run ``dag`` once per logical date, one day apart, until the summary says the next run keeps its count
    after a change on full evidence (the verdict holds it), or ``most`` runs. Per run: the data
    group's count the job really ran, the training task's decision and return value, the summary's record,
    next decision and the summary itself."""
    from airflow_hetero._compat import AIRFLOW_V_3

    sagemaker = endpoint.client("sagemaker")
    runs: list[dict[str, Any]] = []
    for day in range(most):
        when = START + timedelta(days=day)
        dag_run = dag.test(logical_date=when) if AIRFLOW_V_3 else dag.test(execution_date=when)
        tis = {ti.task_id: ti for ti in dag_run.get_task_instances()}
        assert {t: str(ti.state) for t, ti in tis.items()} == {"train": "success", "summarize": "success"}
        train = tis["train"]
        result = train.xcom_pull(task_ids="train")
        described = sagemaker.describe_training_job(TrainingJobName=result["training_job_name"])
        ran = {g["InstanceGroupName"]: g["InstanceCount"] for g in described["ResourceConfig"]["InstanceGroups"]}
        upcoming = train.xcom_pull(task_ids="summarize", key="rightsizing")
        runs.append(
            {
                "ran": ran["data_group"],
                "decision": train.xcom_pull(task_ids="train", key="rightsizing"),
                "result": result["rightsizing"],
                "record": train.xcom_pull(task_ids="summarize", key="rightsizing_record"),
                "next": upcoming,
                "summary": train.xcom_pull(task_ids="summarize"),
            }
        )
        changed = len({r["ran"] for r in runs}) > 1
        if changed and upcoming["groups"][0]["reason"] == "the verdict holds it":
            break  # it changed, and a full streak of evidence at the new count keeps it: it stops here
    return runs


def _trace(runs: list[dict[str, Any]]) -> str:
    return "\n".join(
        f"{r['ran']} data hosts: {r['record']['verdict']['kind']} "
        f"{ {g: v.get('busy_percent') for g, v in r['record']['groups'].items()} } {r['record']['run_seconds']} s"
        f" -> {r['summary']['rightsizing']['lines']}"
        for r in runs
    )


def _steps(runs: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """(count, next count) of each change the training tasks made; each after two runs at its count."""
    changes = [
        (r["decision"]["groups"][0], i) for i, r in enumerate(runs) if r["decision"]["groups"][0]["action"] == "changed"
    ]
    for group, i in changes:
        assert [r["ran"] for r in runs[i - 2 : i]] == [group["count"]] * 2  # the two runs that agreed
        assert group["signals"][0].split(":")[0] == group["signals"][1].split(":")[0]
    return [(g["count"], g["next_count"]) for g, _ in changes]


def _moves(runs: list[dict[str, Any]]) -> list[tuple[str, int, int]]:
    """(action, count, next count) of each change and undo the training tasks made, in order; an undo goes back
    exactly over the change before it (a run made slower by a loaded machine is undone, as the policy says)."""
    moves = [
        (g["action"], g["count"], g["next_count"])
        for g in (r["decision"]["groups"][0] for r in runs)
        if g["action"] in ("changed", "undone")
    ]
    for before, move in itertools.pairwise([None, *moves]):
        if move is not None and move[0] == "undone":
            assert before is not None and before[0] == "changed" and move[1:] == (before[2], before[1]), moves
    return moves


def test_a_starved_data_group_grows_to_balance_and_stops(dag_module: Any, endpoint: LocalEndpoint) -> None:
    runs = run_days(dag_module.rightsizing_starved, 9, endpoint)
    trace = _trace(runs)
    ran = [r["ran"] for r in runs]
    print(trace)  # the worked example of docs/rightsizing.md
    # it grows, never past where the model's trainer is fully fed (6), to where the verdict holds the count
    assert ran[:2] == [1, 1] and 3 <= ran[-1] <= 6, trace
    steps = _steps(runs)
    assert steps[0] == (1, 2), trace  # the verdict asked for 3 or 4 at once: a step at most doubles
    assert all(before < after <= 2 * before for before, after in steps), trace  # only growth, undos aside
    assert _moves(runs)[-1][2] == ran[-1], trace
    first = next(i for i, r in enumerate(runs) if r["ran"] == 2)  # the two runs before it: data group starved
    assert all(r["record"]["verdict"]["bottleneck"] == "data_group" for r in runs[first - 2 : first]), trace
    # at the final count the verdict calls the cluster balanced (on a loaded machine the hosts may get less than
    # their quarter each: not_saturated), in every run or, when the trainer's figure hovers at the waiting
    # threshold, in some: then the runs disagree and the count stays (no oscillation)
    last = [r["record"]["verdict"]["kind"] for r in runs if r["ran"] == ran[-1]]
    assert any(kind in ("balanced", "not_saturated") for kind in last), trace
    grown = next(r for r in runs if r["ran"] == 2)
    assert grown["result"] == {
        "mode": "apply",
        "counts": {"data_group": 2},
        "recommended": {"data_group": 2},
        "actions": {"data_group": "changed"},
    }
    assert grown["decision"]["evidence"] >= 2 and grown["decision"]["fingerprint"] == runs[0]["record"]["fingerprint"]
    final = runs[-1]["next"]  # what the next run would do: stay
    assert final["counts"] == {"data_group": ran[-1]} and final["groups"][0]["action"] == "kept", trace
    assert runs[-1]["record"]["run_seconds"] < runs[0]["record"]["run_seconds"], trace
    from airflow_hetero.plugins.page import render_page

    page = render_page(runs[-1]["summary"], where="w")
    assert f"Right-sizing (apply, objective cost): the next run uses data_group={ran[-1]}" in page


def test_an_over_provisioned_data_group_shrinks_and_stays(dag_module: Any, endpoint: LocalEndpoint) -> None:
    runs = run_days(dag_module.rightsizing_over, 8, endpoint)
    trace = _trace(runs)
    print(trace)
    ran = [r["ran"] for r in runs]
    assert ran[:2] == [4, 4] and ran[-1] in (2, 3) and _moves(runs)[-1][2] == ran[-1], trace
    assert any(r["record"]["groups"]["data_group"].get("over_provisioned") for r in runs if r["ran"] == 4), trace
    steps = _steps(runs)
    assert steps and steps[0][0] == 4 and all(after < before for before, after in steps), trace
    shrunk = next(r for r in runs if r["ran"] < 4)["decision"]["groups"][0]
    assert shrunk["figures"]["cost_per_run_after"] < shrunk["figures"]["cost_per_run"], trace
    # what the next run would do: keep the count; or, when noisy runs at the threshold disagreed until the last
    # day (seen on a loaded machine: 3 kept five times, then two runs agreed on 2), one more shrink within bounds
    final = runs[-1]["next"]
    upcoming = final["groups"][0]
    assert upcoming["action"] in ("kept", "changed") and final["counts"]["data_group"] in (2, 3), trace
    target = upcoming["next_count"]
    kept_or_shrunk = target == ran[-1] if upcoming["action"] == "kept" else target < ran[-1]
    assert kept_or_shrunk and final["counts"]["data_group"] == target, trace
