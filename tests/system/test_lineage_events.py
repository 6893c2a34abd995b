"""OpenLineage events of the production-shaped Airflow: the OpenLineage provider's own listener in every component,
its file transport appending to one file (support.system_airflow.lineage_env), read back and checked.

Each deferred run's train task emits a START and a COMPLETE event (the task resumed after its deferral emits a
START again); the COMPLETE names the job as the endpoint describes it: its ARN as the external query id, the
processing engine, the job type, the instance groups, the identity tags as run tags, the model as an output typed
``MODEL``. Every event in the file, the scheduler's DAG events too, validates against OpenLineage's JSON schemas
(support.openlineage_schemas). No run of its own: the runs are the ``deferred_runs`` fixture's.
"""

from __future__ import annotations

from typing import Any

from support.openlineage_file import airflow_run_id, read_events
from support.openlineage_schemas import event_problems
from support.process_group import wait_until
from support.system_airflow import LINEAGE_NAMESPACE, Stack
from support.system_jobs import TAG, describe, jobs_of

#: How long the events of finished tasks may take to reach the file (each task process emits as it ends).
EMIT_TIMEOUT = 60
JOB = "system_deferred.train"


def train_events(stack: Stack, runs: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The train task's events of each of ``runs``, in the file's order, by Airflow run id."""
    found: dict[str, list[dict[str, Any]]] = {run: [] for run in runs}
    for event in read_events(stack.lineage):
        run = airflow_run_id(event)
        if event.get("job", {}).get("name") == JOB and run in found:
            found[run].append(event)
    return found


def completed(stack: Stack, runs: list[str]) -> dict[str, list[dict[str, Any]]] | None:
    """The events of each run once every run's COMPLETE is in the file; None before."""
    found = train_events(stack, runs)
    done = all(any(e["eventType"] == "COMPLETE" for e in events) for events in found.values())
    return found if done else None


def test_each_deferred_run_emits_the_job_it_ran(stack: Stack, deferred_runs: tuple[list[str], int]) -> None:
    runs, _ = deferred_runs
    found = wait_until("a COMPLETE event of every deferred train task", lambda: completed(stack, runs), EMIT_TIMEOUT, 1)
    jobs = {run: jobs[0] for (run, task), jobs in jobs_of(stack, "system_deferred").items() if task == "train"}
    for run in runs:
        kinds = [e["eventType"] for e in found[run]]
        assert kinds[0] == "START" and kinds.count("COMPLETE") == 1 and set(kinds) == {"START", "COMPLETE"}, kinds
        (complete,) = [e for e in found[run] if e["eventType"] == "COMPLETE"]
        assert complete["job"]["namespace"] == LINEAGE_NAMESPACE
        job = describe(stack, jobs[run]["name"])
        facets = complete["run"]["facets"]
        assert facets["externalQuery"] == {**facets["externalQuery"], "externalQueryId": job["TrainingJobArn"],
                                           "source": "sagemaker"}  # fmt: skip
        assert facets["sagemakerProcessingEngine"]["name"] == "Amazon SageMaker Training"
        assert complete["job"]["facets"]["sagemakerJobType"]["jobType"] == "TRAINING_JOB"
        groups = facets["sagemakerInstanceGroups"]
        assert groups["trainingJobName"] == job["TrainingJobName"]
        stated = [(g["InstanceGroupName"], g["InstanceType"], g["InstanceCount"])
                  for g in job["ResourceConfig"]["InstanceGroups"]]  # fmt: skip
        assert [(g["name"], g["instanceType"], g["instanceCount"]) for g in groups["groups"]] == stated
        assert [g["billedSeconds"] for g in groups["groups"]] == [job["BillableTimeInSeconds"] * n for *_, n in stated]
        # the identity tags, by the job's own ListTags; the OpenLineage client adds a tag of its version
        tags = {
            t["key"]: (t["value"], t["source"]) for t in facets["tags"]["tags"] if t["source"] != "OPENLINEAGE_CLIENT"
        }
        assert tags == {k: (v, "SAGEMAKER") for k, v in jobs[run]["tags"].items() if k.startswith(TAG)}
        assert tags[f"{TAG}run-id"] == (run, "SAGEMAKER")
        (model,) = complete["outputs"]
        assert f"{model['namespace']}/{model['name']}" == job["ModelArtifacts"]["S3ModelArtifacts"]
        assert model["facets"]["datasetType"]["datasetType"] == "MODEL"
        assert [(i["namespace"], i["name"]) for i in complete["inputs"]] == [("s3://hetero-system", "train")]


def test_every_event_validates_against_openlineages_schemas(stack: Stack, deferred_runs: tuple[list[str], int]) -> None:
    runs, _ = deferred_runs
    wait_until("a COMPLETE event of every deferred train task", lambda: completed(stack, runs), EMIT_TIMEOUT, 1)
    events = read_events(stack.lineage)
    problems = [(f"line {n}: {e['job']['name']} {e['eventType']}", found) for n, e in enumerate(events, start=1)
                if (found := event_problems(e))]  # fmt: skip
    assert problems == []
    assert {e["job"]["name"] for e in events} >= {"system_deferred", JOB}  # the DAG's own events and the task's
