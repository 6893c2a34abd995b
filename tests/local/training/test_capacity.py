"""The capacity ledger alone: what a job may take, what a create is refused for, and when both free up."""

from __future__ import annotations

import threading

import pytest

from airflow_hetero.local.training.capacity import (
    CapacityLedger,
    CapacityShortage,
    QuotaExceeded,
    Shortage,
    parse_limits,
)

P4D, G5, C5 = "ml.p4d.24xlarge", "ml.g5.12xlarge", "ml.c5.xlarge"
#: How long threads may take to meet at a barrier, and to finish (a loaded 2-core machine; they take ms).
THREAD_TIMEOUT = 60.0


def test_unlimited_unless_told() -> None:
    ledger = CapacityLedger()
    ledger.admit("a", [(P4D, 1000), (C5, 1)])
    ledger.place("a")
    used = {P4D: 1000, C5: 1}
    assert ledger.state() == {"capacity": {}, "quota": {}, "running": used, "utilization": used}


def test_capacity_counts_every_running_job_of_the_type_and_each_group() -> None:
    ledger = CapacityLedger(capacity={G5: 2})
    ledger.admit("first", [(G5, 1), (C5, 5)])
    ledger.place("first")
    ledger.admit("second", [(C5, 1), (G5, 1), (G5, 1)])  # two groups of the same type: 2 asked
    with pytest.raises(CapacityShortage) as err:
        ledger.place("second")
    assert err.value.shortage == Shortage(G5, limit=2, used=1, delta=2)
    ledger.release("second")  # the failed job keeps no claim
    assert ledger.state()["running"] == {G5: 1, C5: 5}
    ledger.release("first")
    ledger.admit("third", [(G5, 2)])
    ledger.place("third")
    assert ledger.state()["running"] == {G5: 2}


def test_admitted_jobs_hold_no_capacity_until_placed() -> None:
    ledger = CapacityLedger(capacity={G5: 1})
    ledger.admit("waiting", [(G5, 1)])
    ledger.admit("other", [(G5, 1)])
    ledger.place("other")
    with pytest.raises(CapacityShortage):
        ledger.place("waiting")


def test_quota_counts_every_job_not_ended_and_refuses_without_counting() -> None:
    ledger = CapacityLedger(quota={P4D: 2})
    ledger.admit("a", [(P4D, 1)])  # created, not yet placed: counts against the quota
    with pytest.raises(QuotaExceeded) as err:
        ledger.admit("b", [(C5, 3), (P4D, 2)])
    assert err.value.shortage == Shortage(P4D, limit=2, used=1, delta=2)
    assert ledger.state()["utilization"] == {P4D: 1}
    ledger.admit("c", [(P4D, 1)])
    ledger.release("a")
    ledger.release("c")
    ledger.admit("b", [(C5, 3), (P4D, 2)])


def test_changes_apply_to_the_types_named_and_none_lifts_a_limit() -> None:
    ledger = CapacityLedger(capacity={P4D: 0, G5: 2}, quota={C5: 1})
    ledger.change(capacity={P4D: 4})
    assert ledger.state()["capacity"] == {G5: 2, P4D: 4} and ledger.state()["quota"] == {C5: 1}
    ledger.change(capacity={G5: None}, quota={C5: None})
    assert ledger.state()["capacity"] == {P4D: 4} and ledger.state()["quota"] == {}
    with pytest.raises(ValueError, match=r"quota: 'ml\.bogus'"):
        ledger.change(capacity={P4D: 1}, quota={"ml.bogus": 1})
    assert ledger.state()["capacity"] == {P4D: 4}  # a refused change changes nothing


def test_capacity_lowered_below_what_runs_keeps_the_running_jobs() -> None:
    ledger = CapacityLedger()
    ledger.admit("a", [(G5, 3)])
    ledger.place("a")
    ledger.change(capacity={G5: 1})
    assert ledger.state()["running"] == {G5: 3}
    ledger.admit("b", [(G5, 1)])
    with pytest.raises(CapacityShortage):
        ledger.place("b")


def test_parallel_placements_never_exceed_the_capacity() -> None:
    ledger = CapacityLedger(capacity={G5: 5})
    placed: list[str] = []
    late: list[str] = []
    barrier = threading.Barrier(20)

    def take(job: str) -> None:
        ledger.admit(job, [(G5, 1)])
        try:
            barrier.wait(timeout=THREAD_TIMEOUT)
        except threading.BrokenBarrierError:
            late.append(job)
            return
        try:
            ledger.place(job)
            placed.append(job)
        except CapacityShortage:
            ledger.release(job)

    threads = [threading.Thread(target=take, args=(f"j{i}",), daemon=True) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(THREAD_TIMEOUT)
    assert not late, f"the threads did not all reach the barrier within {THREAD_TIMEOUT:g} s"
    assert not [t for t in threads if t.is_alive()], f"placements still running after {THREAD_TIMEOUT:g} s"
    assert len(placed) == 5 and ledger.state()["running"] == {G5: 5}


def test_parse_limits() -> None:
    assert parse_limits(f"{P4D}=0, {G5}=2,,", "--capacity") == {P4D: 0, G5: 2}
    assert parse_limits(f"{P4D}=unlimited", "--capacity") == {P4D: None}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ml.bogus=1", "--capacity: 'ml.bogus' is not a SageMaker training instance type"),
        ("ml.p4d.24xlarg=1", "did you mean 'ml.p4d.24xlarge'?"),
        (f"{P4D}=-1", f"--capacity: {P4D} must be a whole number of instances >= 0, not -1"),
        (f"{P4D}=two", "not 'two'"),
        (P4D, f"--capacity: '{P4D}' is not TYPE=N"),
        ("=1", "is not TYPE=N"),
    ],
)
def test_parse_limits_refuses_clearly(text: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_limits(text, "--capacity")
    assert message in str(err.value)


@pytest.mark.parametrize("value", [-1, 1.5, True, "2"])
def test_a_limit_is_a_whole_number(value: object) -> None:
    with pytest.raises(ValueError, match="must be a whole number of instances >= 0"):
        CapacityLedger(capacity={P4D: value})  # type: ignore[dict-item]
