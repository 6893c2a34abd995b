"""Durable jobs (issue 36, item 1): a retry re-attaches from Airflow 3.3's task state store, or by identity.

Each scenario runs the operator's real code against the golden matrix's stand-in of SageMaker and Batch
(:mod:`support.golden_recorder`: every AWS request recorded, no network, no sleep) with a task state store in the
context, and kills the worker where the scenario says (:class:`WorkerDied` at a tick of the wait, or inside the
store's write). On Airflow 3.3+ a retry reads the store first (``ResumableJobMixin``): one describe re-attaches,
with no walk of the names and no ListServiceJobs. On 2.11 common-compat's stand-in never reads it: the walk of the
names by identity re-attaches. Either way one job is created.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from golden_cases import FALLBACKS, JOB, MODES
from support.golden_recorder import NO_CAPACITY, Case, WorkerDied
from support.golden_tries import Tries, installing

from airflow_hetero._compat import DURABLE_JOBS
from airflow_hetero.operators import HeteroTrainingOperator
from airflow_hetero.operators.training import durability

KEY = HeteroTrainingOperator.external_id_key


class MemoryStore:
    """``context["task_state_store"]``: a dict; ``die_at_set``: the n-th write (1-based) kills the worker first;
    ``fail_at_set``: it raises (the API server unreachable); ``unreadable``: every read raises."""

    def __init__(self, *, die_at_set: int = 0, fail_at_set: int = 0, unreadable: bool = False) -> None:
        self.values: dict[str, Any] = {}
        self.sets = 0
        self.die_at_set, self.fail_at_set, self.unreadable = die_at_set, fail_at_set, unreadable

    def get(self, key: str, default: Any = None) -> Any:
        if self.unreadable:
            raise RuntimeError("the API server did not answer")
        return self.values.get(key, default)

    def set(self, key: str, value: Any, **_: Any) -> None:
        self.sets += 1
        if self.sets == self.die_at_set:
            raise WorkerDied("the worker died between the create's answer and the store write")
        if self.sets == self.fail_at_set:
            raise RuntimeError("the API server did not answer")
        self.values[key] = value


def tries(monkeypatch: pytest.MonkeyPatch, store: MemoryStore, mode: str, **case: Any) -> Tries:
    spec = Case(name="durable", about="", operator={"job": JOB, **MODES[mode], **case.pop("operator", {})}, **case)
    return Tries(spec, monkeypatch, state_store=store)


@pytest.fixture
def recording(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Tries], Tries]]:
    yield from installing(monkeypatch)


# -- killed mid-wait: a retry re-attaches from the store (3.3), by identity (2.11) ------------------------------


@pytest.mark.parametrize("mode", ["direct_sync", "queue_sync"])
def test_a_worker_killed_mid_wait_re_attaches_in_one_call(
    mode: str, monkeypatch: pytest.MonkeyPatch, recording: Any
) -> None:
    store = MemoryStore()
    t = recording(tries(monkeypatch, store, mode, die_at_tick=1, tries=2))
    t.execute()
    assert "worker_died" in t.last
    retry = t.execute()
    assert "returned" in t.last, t.last
    queue = mode.startswith("queue")
    if DURABLE_JOBS:
        assert store.values[KEY]["mode"] == ("queue" if queue else "direct")
        assert retry[0] == ("DescribeServiceJob" if queue else "DescribeTrainingJob")
        assert "ListServiceJobs" not in retry  # re-attached by the stored id, no listing
    else:
        assert store.values == {}  # the stand-in keeps nothing: the walk by identity re-attaches
        assert retry[0] == ("ListServiceJobs" if queue else "DescribeTrainingJob")
    assert "SubmitServiceJob" not in retry and "CreateTrainingJob" not in retry
    assert (t.run.aws.submits if queue else t.run.aws.creates) == 1


@pytest.mark.parametrize("mode", ["direct_deferred", "queue_deferred"])
def test_a_task_lost_while_deferred_re_attaches_and_defers_again(
    mode: str, monkeypatch: pytest.MonkeyPatch, recording: Any
) -> None:
    store = MemoryStore()
    t = recording(tries(monkeypatch, store, mode, tries=2))
    t.execute(resume=False)
    first = t.last["deferred"]
    retry = t.execute(resume=False)
    queue = mode.startswith("queue")
    if DURABLE_JOBS:
        assert retry == ["DescribeServiceJob" if queue else "DescribeTrainingJob"]
    else:
        assert retry[0] == ("ListServiceJobs" if queue else "DescribeTrainingJob")
        assert "SubmitServiceJob" not in retry and "CreateTrainingJob" not in retry
    waited = [
        d["trigger"]["kwargs"].get("job_name") or d["trigger"]["kwargs"].get("job_id")
        for d in (first, t.last["deferred"])
    ]
    assert waited[0] == waited[1]  # the same job, waited for again
    assert (t.run.aws.submits if queue else t.run.aws.creates) == 1
    t.execute()  # a third try resumes to the end
    assert "returned" in t.last, t.last


def test_the_capacity_chain_position_is_stored_and_restored(monkeypatch: pytest.MonkeyPatch, recording: Any) -> None:
    """The first cluster fails for capacity, the worker dies waiting for the second: the retry re-attaches to the
    second by its stored name (not a describe of the first) with the chain's attempts, and creates nothing."""
    store = MemoryStore()
    t = recording(
        tries(monkeypatch, store, "direct_sync", operator=FALLBACKS, training=(NO_CAPACITY,), die_at_tick=2, tries=2)
    )
    t.execute()
    assert "worker_died" in t.last
    retry = t.execute()
    assert "returned" in t.last, t.last
    attempts = t.last["returned"]["capacity_attempts"]
    assert len(attempts) == 1 and attempts[0]["job_name"] != t.last["returned"]["training_job_name"]
    assert t.run.aws.creates == 2 and "CreateTrainingJob" not in retry
    if DURABLE_JOBS:
        assert store.values[KEY]["job_name"] == t.last["returned"]["training_job_name"]
        assert store.values[KEY]["capacity"] == attempts
        described = [r["params"]["TrainingJobName"] for r in t.run.steps[-1]["requests"][:1]]
        assert described == [t.last["returned"]["training_job_name"]]


# -- the mixin's gap and a store that cannot be trusted: the walk by identity -----------------------------------


@pytest.mark.parametrize("mode", ["direct_sync", "queue_sync"])
def test_killed_between_the_create_and_the_store_write_still_one_job(
    mode: str, monkeypatch: pytest.MonkeyPatch, recording: Any
) -> None:
    store = MemoryStore(die_at_set=1)
    t = recording(tries(monkeypatch, store, mode, tries=2))
    t.execute()
    queue = mode.startswith("queue")
    if DURABLE_JOBS:
        assert "worker_died" in t.last and store.values == {}
    retry = t.execute()
    assert "returned" in t.last, t.last
    assert (t.run.aws.submits if queue else t.run.aws.creates) == 1  # the walk found it by its identity
    assert retry[0] == ("ListServiceJobs" if queue else "DescribeTrainingJob")


def test_a_store_behind_the_chain_is_caught_up_by_the_walk(monkeypatch: pytest.MonkeyPatch, recording: Any) -> None:
    """The second cluster's write fails (the store still names the first, failed job); the worker dies: the retry
    finds the failed job terminal and walks to the running one. Two clusters, no third."""
    store = MemoryStore(fail_at_set=2)
    t = recording(
        tries(monkeypatch, store, "direct_sync", operator=FALLBACKS, training=(NO_CAPACITY,), die_at_tick=2, tries=2)
    )
    t.execute()
    retry = t.execute()
    assert "returned" in t.last, t.last
    assert t.run.aws.creates == 2 and "CreateTrainingJob" not in retry
    if DURABLE_JOBS:
        assert store.values[KEY]["job_name"] == t.last["returned"]["training_job_name"]  # written again


def test_an_unreadable_store_falls_back_to_the_walk(monkeypatch: pytest.MonkeyPatch, recording: Any) -> None:
    store = MemoryStore()
    t = recording(tries(monkeypatch, store, "direct_sync", die_at_tick=1, tries=2))
    t.execute()
    store.unreadable = True
    t.execute()
    assert "returned" in t.last and t.run.aws.creates == 1


def test_a_stored_job_of_another_mode_is_not_used(monkeypatch: pytest.MonkeyPatch, recording: Any) -> None:
    store = MemoryStore()
    store.values[KEY] = {"mode": "queue", "service_job_id": "x", "job_name": "y"}
    t = recording(tries(monkeypatch, store, "direct_sync"))
    t.execute()
    assert "returned" in t.last and t.run.aws.creates == 1


def test_durable_false_submits_a_new_job_on_a_retry(monkeypatch: pytest.MonkeyPatch, recording: Any) -> None:
    store = MemoryStore()
    t = recording(tries(monkeypatch, store, "direct_sync", operator={"durable": False}, die_at_tick=1, tries=2))
    t.execute()
    t.execute()
    assert "returned" in t.last and t.run.aws.creates == 2
    assert store.values == {}


# -- durable and on_existing_job: one knob ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("durable", "on_existing", "expected"),
    [
        (None, None, (True, "reattach")),
        (True, None, (True, "reattach")),
        (False, None, (False, "new")),
        (None, "new", (False, "new")),
        (None, "fail", (False, "fail")),
        (False, "fail", (False, "fail")),
        (True, "reattach", (True, "reattach")),
    ],
)
def test_durable_is_on_existing_job(durable: bool | None, on_existing: str | None, expected: tuple[bool, str]) -> None:
    assert durability(durable, on_existing) == expected


@pytest.mark.parametrize(("durable", "on_existing"), [(True, "new"), (True, "fail"), (False, "reattach")])
def test_a_contradictory_pair_fails_the_parse(durable: bool, on_existing: str) -> None:
    with pytest.raises(ValueError, match="contradicts"):
        HeteroTrainingOperator(task_id="t", job=JOB, durable=durable, on_existing_job=on_existing)  # type: ignore[arg-type]


def test_durable_from_default_args_and_no_stand_in_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # common-compat's stand-in warns when durable reaches it
        op = HeteroTrainingOperator(task_id="t", job=JOB, default_args={"durable": False})
        explicit = HeteroTrainingOperator(task_id="u", job=JOB, durable=True)
    assert (op.durable, op.on_existing_job) == (False, "new")
    assert (explicit.durable, explicit.on_existing_job) == (True, "reattach")
