"""Managed spot on the offline endpoint: interruptions, restarts, checkpoints, MaxWait, the stand-in bill.

Every host of the job runs :data:`STEPPER`: it counts steps into its own checkpoint folder
(``runtime.checkpoint_dir()``), one step per ``pause`` seconds, and counts its runs there too; so a host
that finds its runs count above 1 at the end was restored from S3 after each interruption. Before its
``min_runs``-th run a host holds at its last step, waiting to be interrupted. Tests wait
for what the hosts wrote (the checkpoints in S3), never for a time.
"""

from __future__ import annotations

import io
import json
import tarfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from support.local_jobkit import BUCKET, put_source, request, unique, wait
from support.service_model import check_answer

from airflow_hetero.local import LocalEndpoint, RunOptions, SpotOptions
from airflow_hetero.local.api.spot_control import INTERRUPT_PATH, interrupt_job
from airflow_hetero.local.training.spot import SpotSchedule, billable_seconds
from airflow_hetero.logs import CostSpec
from airflow_hetero.logs.summarize import summarize_training_job
from airflow_hetero.logs.table import format_table
from airflow_hetero.pricing.price_list import Price
from airflow_hetero.sagemaker_facts import (
    MAX_WAIT_EXCEEDED_MESSAGE,
    SPOT_INTERRUPTED_MESSAGE,
    STAND_IN_SPOT_SAVING,
)

pytestmark = pytest.mark.slow

ENDPOINT_RUN = {"stop_grace": 1.0}
ENDPOINT_SPOT = SpotOptions(restart_delay=0.3, checkpoint_sync_interval=0.2)
GROUPS = (("data", "ml.c5.xlarge", 2), ("dnn", "ml.p3.2xlarge", 1))
HOSTS = sum(count for _, _, count in GROUPS)
STEPPER = """
    import json, os, time
    from airflow_hetero import runtime
    env = runtime.environment()
    folder = runtime.checkpoint_dir()
    path = folder / "state.json"
    state = json.loads(path.read_text()) if path.exists() else {"runs": 0, "steps": 0}
    print(f"{env.current_host}: resumed at step {state['steps']} (run {state['runs'] + 1})", flush=True)
    state["runs"] += 1
    steps, pause = int(os.environ["SM_HP_STEPS"]), float(os.environ["SM_HP_PAUSE"])
    if state["runs"] > 1 and os.environ.get("SM_HP_QUICK_RESTART") == "true":
        steps = state["steps"]  # a restored run ends at once
    last_run = state["runs"] >= int(os.environ.get("SM_HP_MIN_RUNS", "1"))
    while True:
        path.with_suffix(".tmp").write_text(json.dumps(state))
        os.replace(path.with_suffix(".tmp"), path)
        if state["steps"] >= steps:
            break
        time.sleep(pause)
        if state["steps"] < steps - 1 or last_run:  # before its last run, a host holds at its last step
            state["steps"] += 1
    with open(os.path.join(os.environ["SM_MODEL_DIR"], env.current_host + ".json"), "w") as out:
        json.dump({**state, "group": env.current_instance_group, "folder": str(folder)}, out)
"""


def spot_request(
    s3: Any,
    name: str,
    *,
    steps: int = 10,
    pause: float = 0.5,
    max_run: int = 120,
    max_wait: int = 600,
    quick_restart: bool = False,
    min_runs: int = 1,
) -> dict[str, Any]:
    body = request(
        name,
        put_source(s3, name, STEPPER),
        groups=GROUPS,
        hyperparameters={"steps": steps, "pause": pause, "quick_restart": quick_restart, "min_runs": min_runs},
        max_runtime=max_run,
    )
    body["EnableManagedSpotTraining"] = True
    body["StoppingCondition"]["MaxWaitTimeInSeconds"] = max_wait
    body["CheckpointConfig"] = {"S3Uri": f"s3://{BUCKET}/checkpoints/{name}"}
    return body


def checkpoints(s3: Any, name: str) -> dict[str, dict[str, Any]]:
    """``<group>/<host>`` -> the state.json that host's checkpoint folder holds in S3 (what was copied)."""
    prefix = f"checkpoints/{name}/"
    found: dict[str, dict[str, Any]] = {}
    for obj in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", []):
        if obj["Key"].endswith("/state.json"):
            body = s3.get_object(Bucket=BUCKET, Key=obj["Key"])["Body"].read()
            found[obj["Key"][len(prefix) : -len("/state.json")]] = json.loads(body)
    return found


def wait_for(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def every_host(s3: Any, name: str, run: int) -> Callable[[], bool]:
    """True once every host has copied a checkpoint of its run ``run`` with at least one step in it."""

    def check() -> bool:
        states = checkpoints(s3, name)
        return len(states) == HOSTS and all(s["runs"] >= run and s["steps"] >= 1 for s in states.values())

    return check


def models(s3: Any, describe: dict[str, Any]) -> dict[str, dict[str, Any]]:
    key = describe["ModelArtifacts"]["S3ModelArtifacts"].removeprefix(f"s3://{BUCKET}/")
    data = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: json.load(tar.extractfile(m)) for m in tar.getmembers() if m.isfile()}  # type: ignore[arg-type]


def statuses(describe: dict[str, Any]) -> list[str]:
    return [t["Status"] for t in describe["SecondaryStatusTransitions"]]


def test_a_job_interrupted_twice_on_demand_restarts_every_host_from_its_checkpoint(
    endpoint: LocalEndpoint, sm: Any, s3: Any
) -> None:
    name = unique("spot-demand")
    # the hosts hold at their last step until their third run: however slow the machine, the job is still
    # training when it is interrupted (an interruption that never comes ends it at MaxRuntime, not Completed)
    sm.create_training_job(**spot_request(s3, name, min_runs=3))
    wait_for(every_host(s3, name, 1), "a first checkpoint of every host")
    assert endpoint.interrupt(name)["TrainingJobName"] == name
    wait_for(lambda: "Interrupted" in statuses(sm.describe_training_job(TrainingJobName=name)), "Interrupted")
    wait_for(every_host(s3, name, 2), "a checkpoint of every host's second run")
    assert interrupt_job(endpoint.url, name)["SecondaryStatus"] == "Training"  # the control route
    done = wait(sm, name, timeout=120)

    assert done["TrainingJobStatus"] == "Completed", done.get("FailureReason")
    run = ["Downloading", "Training"]
    restart = ["Interrupted", "Restarting", "Starting", *run]
    assert statuses(done) == ["Starting", *run, *restart, *restart, "Uploading", "Completed"]
    transitions = done["SecondaryStatusTransitions"]
    assert all(t["StatusMessage"] and t["StartTime"] <= t["EndTime"] for t in transitions)
    assert [t["StatusMessage"] for t in transitions if t["Status"] == "Interrupted"] == [SPOT_INTERRUPTED_MESSAGE] * 2
    # every host ran three times and each run resumed where the last one's checkpoint was
    hosts = models(s3, done)
    assert len(hosts) == HOSTS
    assert all(state["runs"] == 3 and state["steps"] == 10 for state in hosts.values()), hosts
    folders = {f"{s['group']}/{n.removesuffix('.json')}" for n, s in hosts.items()}
    assert folders == set(checkpoints(s3, name))  # one S3 sub-prefix per group and host
    assert all(s["folder"].endswith(f"/checkpoints/{s['group']}/{n.removesuffix('.json')}") for n, s in hosts.items())
    # MaxRuntime and TrainingTime count the runs, the bill the stand-in discount of them
    trained = done["TrainingTimeInSeconds"]
    assert trained <= round(done["TrainingEndTime"].timestamp() - done["TrainingStartTime"].timestamp())
    assert done["BillableTimeInSeconds"] == max(1, round(trained * (1 - STAND_IN_SPOT_SAVING))) < trained
    check_answer("DescribeTrainingJob", done)
    # the summary, its cost and verdict show each group's saving: count x (training - billable) seconds
    prices = {t: Price(t, 1.0 + i, "USD", "override") for i, (_, t, _) in enumerate(GROUPS)}
    summary = summarize_training_job(
        name,
        logs_client=endpoint.client("logs"),
        cloudwatch_client=endpoint.client("cloudwatch"),
        sagemaker_client=sm,
        cost=CostSpec(prices),
    )
    unbilled = trained - done["BillableTimeInSeconds"]
    for group, instance_type, count in GROUPS:
        assert summary["groups"][group]["spot_saved_instance_seconds"] == count * unbilled
        saving = summary["cost"]["groups"][group]["spot_saving"]
        assert saving == round(count * unbilled * prices[instance_type].per_hour / 3600, 4)
    assert "spot saving" in format_table(summary)


def test_seeded_random_interruptions_restart_the_job_until_it_completes(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Every 3 s of training draws an interruption with probability 1: the first run (1000 steps) ends
    Interrupted, the restored run ends at once; a host that had not written its state before the interruption
    (a busy machine) runs again, and is interrupted again."""
    with LocalEndpoint(
        workdir=tmp_path_factory.mktemp("seeded"),
        seed=7,
        run=RunOptions(stop_grace=1.0),
        spot=SpotOptions(
            interrupt_probability=1.0,
            interrupt_interval=3.0,
            restart_delay=0.2,
            saving=0.5,
            checkpoint_sync_interval=0.2,
        ),
    ) as ep:
        sm, s3 = ep.client("sagemaker"), ep.client("s3")
        s3.create_bucket(Bucket=BUCKET)
        name = unique("spot-seeded")
        sm.create_training_job(**spot_request(s3, name, steps=1000, pause=0.2, quick_restart=True))
        done = wait(sm, name, timeout=180)
        s3_models = models(s3, done)
    assert done["TrainingJobStatus"] == "Completed", done.get("FailureReason")
    interruptions = statuses(done).count("Interrupted")
    assert interruptions >= 1
    # a run interrupted before a host's script wrote its state leaves that host's count behind
    runs = sorted(state["runs"] for state in s3_models.values())
    assert runs[0] > 1 and runs[-1] <= interruptions + 1, (runs, interruptions)
    assert done["BillableTimeInSeconds"] == max(1, round(done["TrainingTimeInSeconds"] * 0.5))


def test_the_schedule_is_seeded_by_the_seed_and_the_job() -> None:
    """The random mode draws the same interruptions for the same seed and job, other ones otherwise."""

    def draws(seed: int, job: str) -> list[bool]:
        schedule = SpotSchedule(SpotOptions(interrupt_probability=0.5, interrupt_interval=1.0, seed=seed), job)
        schedule.begin_training(0.0)
        return [schedule.due(float(second)) for second in range(1, 41)]

    assert draws(7, "a") == draws(7, "a")
    assert draws(7, "a") != draws(8, "a") and draws(7, "a") != draws(7, "b")
    assert 5 < sum(draws(7, "a")) < 35


def test_the_fixed_schedule_interrupts_each_run_after_its_seconds() -> None:
    schedule = SpotSchedule(SpotOptions(interrupt_after=(2.0, 3.0)), "job")
    schedule.begin_training(10.0)
    assert [schedule.due(t) for t in (11.0, 11.9, 12.0, 12.5)] == [False, False, True, False]
    schedule.begin_training(20.0)
    assert [schedule.due(t) for t in (22.0, 23.0, 40.0)] == [False, True, False]
    schedule.begin_training(50.0)  # a third run: no entry left, it is not interrupted
    assert not schedule.due(500.0)
    assert schedule.interruptions == 2


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"interrupt_after": (0.0,)}, "spot_interrupt_after: every entry must be above 0"),
        ({"interrupt_probability": 1.5}, "spot_interrupt_probability must be between 0 and 1"),
        ({"saving": 1.0}, "spot_saving must be at least 0 and below 1"),
        ({"checkpoint_sync_interval": 0}, "checkpoint_sync_interval must be above 0"),
    ],
)
def test_bad_spot_options_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SpotOptions(**options)


def test_billable_time_is_the_discounted_training_time() -> None:
    assert billable_seconds(100, None) == 100
    assert billable_seconds(100, 0.7) == 30
    assert billable_seconds(1, 0.7) == 1  # never 0 for a job that ran


@pytest.fixture(scope="module")
def no_capacity_back(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalEndpoint]:
    """An endpoint whose interrupted jobs wait 10 minutes for capacity."""
    with LocalEndpoint(
        workdir=tmp_path_factory.mktemp("waits"), run=RunOptions(stop_grace=1.0), spot=SpotOptions(restart_delay=600)
    ) as ep:
        ep.client("s3").create_bucket(Bucket=BUCKET)
        yield ep


def test_max_wait_counts_the_wait_for_capacity_and_stops_the_job(no_capacity_back: LocalEndpoint) -> None:
    """MaxWaitTimeInSeconds is wall time since the job was created, the wait after an interruption included;
    MaxRuntime counts training only: the job trained less than its MaxRuntime when MaxWait stopped it.

    The interruption is asked for at once, so it comes at the run's first look, as soon as its hosts run (no
    checkpoint to wait for): the hosts' start-up on a busy machine is all that must fit in MaxRuntime."""
    ep = no_capacity_back
    sm, s3 = ep.client("sagemaker"), ep.client("s3")
    name = unique("spot-maxwait")
    sm.create_training_job(**spot_request(s3, name, steps=1000, pause=0.2, max_run=20, max_wait=20))
    ep.interrupt(name)  # as soon as it trains
    done = wait(sm, name, timeout=90)

    assert (done["TrainingJobStatus"], done["SecondaryStatus"]) == ("Stopped", "MaxWaitTimeExceeded")
    assert statuses(done)[-2:] == ["Interrupted", "MaxWaitTimeExceeded"]
    assert done["SecondaryStatusTransitions"][-1]["StatusMessage"] == MAX_WAIT_EXCEEDED_MESSAGE
    assert "FailureReason" not in done
    assert done["TrainingTimeInSeconds"] < 20
    assert done["TrainingEndTime"].timestamp() - done["CreationTime"].timestamp() >= 20
    check_answer("DescribeTrainingJob", done)


def test_a_job_stopped_while_interrupted_ends_stopped(no_capacity_back: LocalEndpoint) -> None:
    ep = no_capacity_back
    sm, s3 = ep.client("sagemaker"), ep.client("s3")
    name = unique("spot-stop")
    sm.create_training_job(**spot_request(s3, name, steps=1000, pause=0.2))
    ep.interrupt(name)  # as soon as it trains
    wait_for(lambda: statuses(sm.describe_training_job(TrainingJobName=name))[-1] == "Interrupted", "Interrupted")
    waiting = sm.describe_training_job(TrainingJobName=name)
    assert (waiting["TrainingJobStatus"], waiting["SecondaryStatus"]) == ("InProgress", "Interrupted")
    # an interrupted job's answer fits botocore's shape too, but for ModelArtifacts, which botocore requires and
    # the endpoint sets on ended jobs only (as it does for every job still running)
    check_answer("DescribeTrainingJob", {"ModelArtifacts": {"S3ModelArtifacts": f"s3://{BUCKET}/m"}, **waiting})
    sm.stop_training_job(TrainingJobName=name)
    done = wait(sm, name, timeout=30)
    assert (done["TrainingJobStatus"], statuses(done)[-3:]) == ("Stopped", ["Interrupted", "Stopping", "Stopped"])
    assert done["BillableTimeInSeconds"] == billable_seconds(done["TrainingTimeInSeconds"], STAND_IN_SPOT_SAVING)
    check_answer("DescribeTrainingJob", done)
    assert ep.capacity_state()["running"] == {}  # its instances are given back


def test_a_local_path_outside_opt_ml_is_refused_at_create(endpoint: LocalEndpoint, sm: Any, s3: Any) -> None:
    name = unique("spot-localpath")
    body = spot_request(s3, name)
    body["CheckpointConfig"]["LocalPath"] = "/tmp/checkpoints"
    with pytest.raises(ClientError) as info:
        sm.create_training_job(**body)
    assert info.value.response["Error"]["Code"] == "ValidationException"
    message = info.value.response["Error"]["Message"]
    assert "CheckpointConfig.LocalPath /tmp/checkpoints is not inside /opt/ml" in message
    assert sm.list_training_jobs(NameContains=name)["TrainingJobSummaries"] == []


def test_only_running_spot_jobs_are_interrupted(endpoint: LocalEndpoint, sm: Any, s3: Any) -> None:
    plain = unique("not-spot")
    body = spot_request(s3, plain, steps=1, pause=0.1)
    del body["EnableManagedSpotTraining"], body["StoppingCondition"]["MaxWaitTimeInSeconds"]
    sm.create_training_job(**body)
    with pytest.raises(ValueError, match="is not a managed spot training job"):
        endpoint.interrupt(plain)
    with pytest.raises(ValueError, match=r"\(400\): Requested resource not found"):
        interrupt_job(endpoint.url, "no-such-job")
    done = wait(sm, plain)
    assert done["TrainingJobStatus"] == "Completed"
    assert done["BillableTimeInSeconds"] == done["TrainingTimeInSeconds"]  # on demand: no discount
    ended = unique("spot-ended")
    sm.create_training_job(**spot_request(s3, ended, steps=0, pause=0.1))
    wait(sm, ended)
    with pytest.raises(ValueError, match="is Completed: only a job InProgress is interrupted"):
        endpoint.interrupt(ended)
    assert post(endpoint.url + INTERRUPT_PATH, b'{"Name": "x"}')[0] == 400
    assert post(endpoint.url + INTERRUPT_PATH, None)[0] == 405  # a GET


def post(url: str, body: bytes | None) -> tuple[int, dict[str, Any]]:
    """Status and JSON answer of a POST (GET when ``body`` is None) to the endpoint's control path."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=body), timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())
