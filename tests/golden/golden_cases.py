"""The golden matrix of the training operator: four modes x five features, then the scenarios.

Modes: direct sync, direct deferrable, queue (``batch_queue=``) sync, queue deferrable. Features: plain, capacity
fallbacks, a budget (``max_cost`` with prices), managed spot (with checkpoints), right-sizing in apply mode (earlier
runs' XComs as evidence). Scenarios: a capacity failure (the next cluster runs; in queue mode Batch requeues), a
budget stop (SageMaker stops the job at the cap the budget set), a re-attach after a lost create (or submit)
answer, and a few more that the refactor of issue 35 moves the code of (a quota refusal at create, every cluster
failing, a retry re-attaching after its worker died, request mode, Batch reporting an attempt's end late).
"""

from __future__ import annotations

from typing import Any

from support.golden_recorder import (
    BATCH_REASON_PREFIX,
    CAPACITY_ERROR,
    COMPLETED,
    MAX_RUNTIME_EXCEEDED,
    NO_CAPACITY,
    TRAINING,
    Case,
    Fault,
    ServiceStep,
)

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/hetero-train:latest"
#: The job of every case (its data group's count differs for right-sizing).
JOB: dict[str, Any] = {
    "role": ROLE,
    "image_uri": IMAGE,
    "entry_point": "train.py",
    "source_dir": "s3://code/src/sourcedir.tar.gz",
    "output_path": "s3://bucket/output",
    "base_job_name": "golden",
    "instance_groups": [
        {"instance_group_name": "data_group", "instance_type": "ml.c5.xlarge", "instance_count": 2},
        {"instance_group_name": "train_group", "instance_type": "ml.g5.xlarge", "instance_count": 1},
    ],
    "inputs": {"train": {"s3_data": "s3://bucket/train", "instance_groups": ["data_group"]}},
    "hyperparameters": {"epochs": 2},
    "max_run": 7200,
    "tags": [{"Key": "team", "Value": "ml"}],
}
SPOT_JOB: dict[str, Any] = {
    **JOB,
    "use_spot_instances": True,
    "max_wait": 14400,
    "checkpoint_s3_uri": "s3://bucket/checkpoints/golden",
}
RIGHTSIZED_JOB: dict[str, Any] = {
    **JOB,
    "instance_groups": [{**JOB["instance_groups"][0], "instance_count": 1}, JOB["instance_groups"][1]],
}
#: The same job as a CreateTrainingJob request (request mode).
REQUEST: dict[str, Any] = {
    "TrainingJobName": "golden",
    "RoleArn": ROLE,
    "AlgorithmSpecification": {"TrainingImage": IMAGE, "TrainingInputMode": "File"},
    "HyperParameters": {"epochs": "2"},
    "InputDataConfig": [
        {
            "ChannelName": "train",
            "DataSource": {
                "S3DataSource": {
                    "S3DataType": "S3Prefix",
                    "S3Uri": "s3://bucket/train",
                    "S3DataDistributionType": "FullyReplicated",
                    "InstanceGroupNames": ["data_group"],
                }
            },
        }
    ],
    "OutputDataConfig": {"S3OutputPath": "s3://bucket/output"},
    "ResourceConfig": {
        "InstanceGroups": [
            {"InstanceGroupName": "data_group", "InstanceType": "ml.c5.xlarge", "InstanceCount": 2},
            {"InstanceGroupName": "train_group", "InstanceType": "ml.g5.xlarge", "InstanceCount": 1},
        ],
        "VolumeSizeInGB": 30,
    },
    "StoppingCondition": {"MaxRuntimeInSeconds": 7200},
    "Tags": [{"Key": "team", "Value": "ml"}],
}
PRICES = {"ml.c5.xlarge": 0.204, "ml.g5.xlarge": 1.408, "ml.g5.2xlarge": 1.515, "ml.p3.2xlarge": 3.825}
QUEUE = "gpu-queue"

MODES: dict[str, dict[str, Any]] = {
    "direct_sync": {"deferrable": False},
    "direct_deferred": {"deferrable": True},
    "queue_sync": {"deferrable": False, "batch_queue": QUEUE},
    "queue_deferred": {"deferrable": True, "batch_queue": QUEUE},
}
FALLBACKS = {"fallback_instance_types": {"train_group": ["ml.g5.2xlarge", "ml.p3.2xlarge"]}}
#: 2 x 0.204 + 1.408 = 1.816 an hour: 2.0 leaves about 66 minutes, under the job's 7200 s.
BUDGET = {"max_cost": 2.0, "prices": PRICES, "use_pricing_api": False}
RIGHTSIZING_POLICY = {"groups": {"data_group": {"max_count": 4}}, "mode": "apply", "summary_task_id": "summarize"}


def rightsizing_evidence(op: Any) -> dict[tuple[str, str], Any]:
    """Two earlier runs whose data group (1 host) starved the trainer: the previous run's decision and its
    summary's record, as the summary task pushes them (tests/operators/test_rightsizing_steps.py)."""
    from support.rightsizing_runs import DATA, summary

    from airflow_hetero.job.rightsizing import record_of_summary
    from airflow_hetero.operators.rightsizing_steps import fingerprint as fingerprint_of

    fingerprint = fingerprint_of(op, [DATA])

    def starved(run_id: str) -> dict[str, Any]:
        return record_of_summary(
            summary(1, ratio=5, name=run_id), {"fingerprint": fingerprint, "counts": {DATA: 1}}, run_id
        )

    previous = {"run_id": "r2", "fingerprint": fingerprint, "counts": {DATA: 1}, "history": [starved("r1")]}
    return {("train", "rightsizing"): previous, ("summarize", "rightsizing_record"): starved("r2")}


def _features() -> dict[str, dict[str, Any]]:
    return {
        "plain": {"operator": {"job": JOB}},
        "fallbacks": {"operator": {"job": JOB, **FALLBACKS}},
        "budget": {"operator": {"job": JOB, **BUDGET}},
        "spot": {"operator": {"job": SPOT_JOB}},
        "rightsizing": {
            "operator": {
                "job": RIGHTSIZED_JOB,
                "rightsizing": RIGHTSIZING_POLICY,
                "prices": PRICES,
                "use_pricing_api": False,
            },
            "prior": rightsizing_evidence,
        },
    }


#: Batch requeues an attempt SageMaker could not place; the second attempt runs.
QUEUE_CAPACITY_RETRY = (
    ServiceStep("RUNNABLE", "Waiting for capacity"),
    ServiceStep("SCHEDULED", new_attempt=True),
    ServiceStep("RUNNABLE", BATCH_REASON_PREFIX + CAPACITY_ERROR, training=NO_CAPACITY[0]),
    ServiceStep("SCHEDULED", new_attempt=True),
    ServiceStep("RUNNING", BATCH_REASON_PREFIX + TRAINING.message, training=TRAINING),
    ServiceStep("SUCCEEDED", BATCH_REASON_PREFIX + COMPLETED.message, training=COMPLETED),
)
#: The attempt is stopped at its MaxRuntimeInSeconds: Batch fails the service job (no retry strategy).
QUEUE_CAPPED = (
    ServiceStep("RUNNABLE", "Waiting for capacity"),
    ServiceStep("SCHEDULED", new_attempt=True),
    ServiceStep("RUNNING", BATCH_REASON_PREFIX + TRAINING.message, training=TRAINING),
    ServiceStep("FAILED", BATCH_REASON_PREFIX + MAX_RUNTIME_EXCEEDED.message, training=MAX_RUNTIME_EXCEEDED),
)
#: Batch still says RUNNING one poll after the attempt's training job completed, then SUCCEEDED.
QUEUE_LAGGING = (
    ServiceStep("RUNNABLE", "Waiting for capacity"),
    ServiceStep("SCHEDULED", new_attempt=True),
    ServiceStep("RUNNING", BATCH_REASON_PREFIX + TRAINING.message, training=TRAINING),
    ServiceStep("RUNNING", BATCH_REASON_PREFIX + TRAINING.message, training=COMPLETED),
    ServiceStep("SUCCEEDED", BATCH_REASON_PREFIX + COMPLETED.message),
)
QUOTA_REFUSAL = Fault(
    "refuse",
    "ResourceLimitExceeded",
    "The account-level service limit 'ml.g5.xlarge for training job usage' is 0 Instances, with current "
    "utilization of 0 Instances and a request delta of 1 Instances. Please use AWS Service Quotas to request an "
    "increase for this quota.",
)
LOST = Fault("lost")


def _matrix() -> list[Case]:
    cases = []
    for mode, mode_args in MODES.items():
        for feature, spec in _features().items():
            cases.append(
                Case(
                    name=f"{mode}__{feature}",
                    about=f"{mode.replace('_', ' ')}, {feature}: the job runs and completes",
                    operator={**spec["operator"], **mode_args},
                    prior=spec.get("prior"),
                )
            )
    return cases


def _scenarios() -> list[Case]:
    cases = []
    for mode in ("direct_sync", "direct_deferred"):
        args = MODES[mode]
        cases += [
            Case(
                name=f"{mode}__capacity_failure",
                about="fallbacks; the first cluster fails with CapacityError, the next one runs",
                operator={"job": JOB, **FALLBACKS, **args},
                training=(NO_CAPACITY,),
            ),
            Case(
                name=f"{mode}__budget_stop",
                about="max_cost; SageMaker stops the job at the runtime cap the budget set",
                operator={"job": JOB, **BUDGET, **args},
                training=((TRAINING, MAX_RUNTIME_EXCEEDED),),
            ),
            Case(
                name=f"{mode}__lost_create_answer",
                about="the CreateTrainingJob answer is lost (read time-out); the job is found by name and adopted",
                operator={"job": JOB, **args},
                create_faults={0: LOST},
            ),
        ]
    for mode in ("queue_sync", "queue_deferred"):
        args = MODES[mode]
        cases += [
            Case(
                name=f"{mode}__capacity_failure",
                about="the first attempt fails with CapacityError, Batch requeues the job, the second attempt runs",
                operator={"job": JOB, **args},
                services=(QUEUE_CAPACITY_RETRY,),
            ),
            Case(
                name=f"{mode}__budget_stop",
                about="max_cost; SageMaker stops the attempt at the runtime cap the budget set, Batch fails the job",
                operator={"job": JOB, **BUDGET, **args},
                services=(QUEUE_CAPPED,),
            ),
            Case(
                name=f"{mode}__lost_submit_answer",
                about="the SubmitServiceJob answer is lost (read time-out); the job is found by name and adopted",
                operator={"job": JOB, **args},
                submit_faults={0: LOST},
            ),
        ]
    cases += [
        Case(
            name="direct_sync__capacity_quota_refused",
            about="fallbacks; the first create is refused for the type's quota, the next cluster is created",
            operator={"job": JOB, **FALLBACKS, **MODES["direct_sync"]},
            create_faults={0: QUOTA_REFUSAL},
        ),
        Case(
            name="direct_sync__capacity_exhausted",
            about="fallbacks; every cluster fails with CapacityError: the task fails naming the attempts",
            operator={"job": JOB, **FALLBACKS, **MODES["direct_sync"]},
            training=(NO_CAPACITY, NO_CAPACITY, NO_CAPACITY),
        ),
        Case(
            name="direct_sync__spot_budget",
            about="managed spot and max_cost: MaxRuntime capped, MaxWait lowered by as much",
            operator={"job": SPOT_JOB, **BUDGET, **MODES["direct_sync"]},
        ),
        Case(
            name="direct_sync__request_mode",
            about="request= (a CreateTrainingJob request) instead of a definition",
            operator={"request": REQUEST, **MODES["direct_sync"]},
        ),
        Case(
            name="direct_sync__retry_reattaches",
            about="the worker dies while the job runs; the retry finds the job by name and identity and waits",
            operator={"job": JOB, **MODES["direct_sync"]},
            die_at_tick=1,
            tries=2,
        ),
        Case(
            name="queue_sync__retry_reattaches",
            about="the worker dies while the service job waits; the retry finds it by name and identity and waits",
            operator={"job": JOB, **MODES["queue_sync"]},
            die_at_tick=1,
            tries=2,
        ),
        Case(
            name="queue_deferred__batch_lags_attempt_end",
            about="Batch still says RUNNING one poll after the attempt's training job completed",
            operator={"job": JOB, **MODES["queue_deferred"]},
            services=(QUEUE_LAGGING,),
        ),
    ]
    return cases


CASES: dict[str, Case] = {case.name: case for case in [*_matrix(), *_scenarios()]}
