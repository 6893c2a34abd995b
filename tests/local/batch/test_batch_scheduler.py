"""The admission rules on their own (pure): capacity, head-of-line order, fair share, misconfiguration,
the instance count of a payload, retry rules; and the ``local serve`` flags and banner of the queue."""

from __future__ import annotations

import argparse
import io
import json
from collections import Counter
from typing import Any

import pytest

from airflow_hetero.local.batch import scheduler
from airflow_hetero.local.batch.models import (
    JobQueue,
    SchedulingPolicy,
    ServiceEnvironment,
    ServiceJob,
    payload_instances,
)
from airflow_hetero.local.cli import _batch_queue, describe_batch

ENV = ServiceEnvironment(name="e", arn="env-e", max_capacity=4)


def _job(seq: int, instances: int, share: str | None = None, priority: int | None = None, **more: Any) -> ServiceJob:
    return ServiceJob(
        job_id=f"j{seq}", job_name=f"j{seq}", job_arn=f"arn/j{seq}", queue_arn="q", payload="{}", created_at=seq,
        seq=seq, instances=instances, share_identifier=share, scheduling_priority=priority, **more,
    )  # fmt: skip


def _queue(priority: int = 1, name: str = "q") -> JobQueue:
    return JobQueue(name=name, arn=name, priority=priority, environments=["env-e"], environment_orders=[1])


def _plan(
    jobs: list[ServiceJob], used: int = 0, policy: SchedulingPolicy | None = None, **usage: int
) -> scheduler.Plan:
    view = scheduler.QueueView(_queue(), jobs, policy, Counter(usage))
    return scheduler.plan([view], {"env-e": ENV}, Counter({"env-e": used}))


def test_admits_while_the_sum_fits_and_blocks_at_the_head() -> None:
    plan = _plan([_job(1, 2), _job(2, 3), _job(3, 1)])
    assert [j.job_id for j, _ in plan.admit] == ["j1"]  # j2 (3) does not fit beside j1 (2): j3 waits behind it
    assert [j.job_id for j in plan.blocked] == ["j2"]
    assert [j.job_id for j, _ in _plan([_job(1, 2), _job(2, 2)]).admit] == ["j1", "j2"]  # exactly full
    assert _plan([_job(1, 1)], used=4).admit == []


def test_a_job_larger_than_every_environment_is_set_aside() -> None:
    plan = _plan([_job(1, 5), _job(2, 1)])
    assert [j.job_id for j in plan.misconfigured] == ["j1"]
    assert [j.job_id for j, _ in plan.admit] == ["j2"]


def test_a_disabled_environment_admits_nothing() -> None:
    disabled = ServiceEnvironment(name="e", arn="env-e", max_capacity=4, state="DISABLED")
    view = scheduler.QueueView(_queue(), [_job(1, 1)])
    assert scheduler.plan([view], {"env-e": disabled}, Counter()).admit == []


def test_fifo_ignores_priority_fair_share_weighs_usage_then_priority() -> None:
    jobs = [_job(1, 1, priority=1), _job(2, 1, priority=9)]
    assert [j.job_id for j in scheduler.queue_order(scheduler.QueueView(_queue(), jobs))] == ["j1", "j2"]
    policy = SchedulingPolicy(
        name="p", arn="p", shares=[{"shareIdentifier": "gold*", "weightFactor": 0.25}, {"shareIdentifier": "b"}]
    )
    fair = [_job(1, 1, "a", 1), _job(2, 1, "a", 9), _job(3, 1, "b"), _job(4, 1, "gold-1")]
    view = scheduler.QueueView(_queue(), fair, policy, Counter({"a": 2, "b": 1, "gold-1": 3}))
    # weighed usage: a 2 x 1.0, b 1 x 1.0, gold-1 3 x 0.25 = 0.75 -> gold-1, b, then a by priority
    assert [j.job_id for j in scheduler.queue_order(view)] == ["j4", "j3", "j2", "j1"]
    assert policy.weight("gold-7") == 0.25 and policy.weight("b") == 1.0 and policy.weight("z") == 1.0


def test_queues_sharing_an_environment_go_by_queue_priority() -> None:
    low = scheduler.QueueView(_queue(1, "low"), [_job(1, 3)])
    high = scheduler.QueueView(_queue(5, "high"), [_job(2, 3)])
    plan = scheduler.plan([low, high], {"env-e": ENV}, Counter())
    assert [j.job_id for j, _ in plan.admit] == ["j2"] and [j.job_id for j in plan.blocked] == ["j1"]


def test_payload_instances_sum_groups_or_count() -> None:
    groups = {"ResourceConfig": {"InstanceGroups": [{"InstanceCount": 2}, {"InstanceCount": 3}]}}
    assert payload_instances(json.dumps(groups)) == 5
    assert payload_instances(json.dumps({"ResourceConfig": {"InstanceCount": 4}})) == 4
    assert payload_instances("not json") == 1


def test_retry_rules() -> None:
    rules = {"attempts": 3, "evaluateOnExit": [{"action": "EXIT", "onStatusReason": "*AlgorithmError*"},
                                              {"action": "RETRY", "onStatusReason": "*"}]}  # fmt: skip
    job = _job(1, 1, retry_strategy=rules)
    assert not job.retries("Received status from SageMaker:AlgorithmError: boom")
    assert job.retries("Received status from SageMaker:InternalServerError: x")
    job.attempts = [{"training_job_name": "t", "training_job_arn": "a", "started_at": 1}]
    assert job.retries("Received status from SageMaker:InternalServerError: x")
    job.attempts.append({"training_job_name": "t2", "training_job_arn": "a2", "started_at": 2, "counted": False})
    job.attempts.append({"training_job_name": "t3", "training_job_arn": "a3", "started_at": 3})
    assert job.retries("Received status from SageMaker:InternalServerError: x")  # a requeue used no attempt
    job.attempts.append({"training_job_name": "t4", "training_job_arn": "a4", "started_at": 4})
    assert not job.retries("Received status from SageMaker:InternalServerError: x")  # attempts used up
    once = _job(2, 1)
    once.attempts = [{"training_job_name": "t", "training_job_arn": "a", "started_at": 1}]  # the attempt that failed
    assert not once.retries("anything")  # one attempt by default


def test_the_batch_queue_flag_and_banner() -> None:
    assert _batch_queue("gpu-queue=4") == ("gpu-queue", 4)
    for bad in ("gpu-queue", "=4", "q=0", "q=many"):
        with pytest.raises(argparse.ArgumentTypeError):
            _batch_queue(bad)

    class Endpoint:
        batch_setup: list[str] = []

    out = io.StringIO()
    describe_batch(Endpoint(), out)
    assert "no job queue yet; restart with --batch-queue NAME=N, or create one" in out.getvalue()
    assert "aws batch create-job-queue --job-queue-name gpu-queue" in out.getvalue()
    Endpoint.batch_setup = ["batch job queue q (arn) on service environment q-env: 2 instance(s)"]
    out = io.StringIO()
    describe_batch(Endpoint(), out)
    assert "  batch job queue q (arn) on service environment q-env: 2 instance(s)" in out.getvalue()
