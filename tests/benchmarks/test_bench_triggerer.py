"""The triggerer benchmark runs its variants end to end against its stand-in endpoint (tiny N)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from benchmarks import triggerer

ROOT = Path(__file__).resolve().parents[2]


def bench(*args: str) -> tuple[list[str], dict[str, list[str]], str]:
    """Run the benchmark; its column titles, its rows (label -> values) and its whole output."""
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.triggerer", *args],
        cwd=ROOT,
        env=dict(os.environ),
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    header, *lines = out.splitlines()[1:]
    return header.split(), {line[:40].strip(): line[40:].split() for line in lines}, out


def test_both_variants_check_every_job_and_report_ratios() -> None:
    # shorter phases than the benchmark's floors for thousands of jobs (3 s, then 10 s): 5 jobs are all checked
    # within 0.5 s; the provider still made 40-41 calls in three runs side by side at load 7-9
    columns, rows, out = bench("--jobs", "5", "--interval", "1", "--window", "2", "--warm-up", "2", "--settle", "6")
    assert columns[:2] == ["provider", "airflow-hetero"], out
    provider, ours = (float(n) for n in rows["DescribeTrainingJob calls"][:2])
    assert 5 <= ours <= 10  # one Describe per job, then listing (and a refresh every 10 intervals)
    assert float(rows["ListTrainingJobs calls"][1]) >= 1
    assert rows["requests refused (invalid for SageMaker)"][:2] == ["0", "0"], out
    # the provider: one per job per poll, ~10 polls at 1 s intervals: at least three polls' worth, and more than ours
    assert provider >= 5 * 3 and provider > ours, out
    assert rows["every job checked once after (s)"][1] != "nan", out
    assert float(rows["full collection, Airflow alone (ms)"][1]) > 0
    lag, not_gc = float(rows["worst loop lag, steady (ms)"][1]), float(rows["not counting GC pauses, steady"][1])
    assert 0 <= not_gc <= lag


def test_the_frozen_gc_variant_runs_with_airflow_local_settings() -> None:
    # 3 jobs: a 3 s settle (instead of the 10 s floor meant for N in the thousands) has them all checked
    columns, rows, out = bench(
        "--jobs", "3", "--interval", "1", "--window", "1", "--only", "ours-frozen", "--warm-up", "2", "--settle", "3"
    )
    assert columns == ["+", "gc.freeze()"], out
    assert rows["jobs checked at least once"] == ["3"], out


def test_the_stand_in_refuses_what_sagemaker_refuses() -> None:
    refusal = triggerer.refuse("ListTrainingJobs", {"SortBy": "LastModifiedTime", "MaxResults": 100})
    assert refusal is not None and refusal["__type"] == "ValidationException"
    assert refusal["message"] == (
        "1 validation error detected: Value 'LastModifiedTime' at 'sortBy' failed to satisfy constraint: "
        "Member must satisfy enum value set: [Name, CreationTime, Status]"
    )
    too_many = triggerer.refuse("ListTrainingJobs", {"MaxResults": 1000})
    assert too_many is not None and "at 'maxResults'" in too_many["message"]
    nameless = triggerer.refuse("DescribeTrainingJob", {})
    assert nameless is not None and "Value null at 'trainingJobName'" in nameless["message"]
    unserved = triggerer.refuse("StopTrainingJob", {"TrainingJobName": "bench-1"})
    assert unserved is not None and unserved["__type"] == "UnknownOperationException"
    assert triggerer.refuse("ListTrainingJobs", {"SortBy": "CreationTime", "LastModifiedTimeAfter": 1.0}) is None


def test_the_stand_in_lists_with_the_filters_sort_and_pages_sagemaker_has() -> None:
    table = {
        name: {
            "TrainingJobName": name,
            "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}",
            "CreationTime": created,
            "LastModifiedTime": modified,
            "TrainingJobStatus": "InProgress",
            "SecondaryStatus": "Training",
            "ResourceConfig": {},
        }
        for name, created, modified in (("a", 1.0, 50.0), ("b", 2.0, 10.0), ("c", 3.0, 40.0))
    }
    body = {"SortBy": "CreationTime", "SortOrder": "Descending", "LastModifiedTimeAfter": 20.0, "MaxResults": 1}
    first = triggerer.list_jobs(table, body)
    assert [j["TrainingJobName"] for j in first["TrainingJobSummaries"]] == ["c"]
    assert "ResourceConfig" not in first["TrainingJobSummaries"][0]  # summaries, not descriptions
    second = triggerer.list_jobs(table, {**body, "NextToken": first["NextToken"]})
    assert [j["TrainingJobName"] for j in second["TrainingJobSummaries"]] == ["a"]
    assert "NextToken" not in second
    by_name = triggerer.list_jobs(table, {"SortBy": "Name", "SortOrder": "Ascending"})
    assert [j["TrainingJobName"] for j in by_name["TrainingJobSummaries"]] == ["a", "b", "c"]
