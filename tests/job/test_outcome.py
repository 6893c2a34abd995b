"""A finished job's outcome: SageMaker's own limit stops get their own message."""

from __future__ import annotations

import pytest

from airflow_hetero.job.outcome import TrainingJobLimitError, resolve_outcome


@pytest.mark.parametrize(
    ("secondary", "condition", "expected"),
    [
        (
            "MaxRuntimeExceeded",
            {"MaxRuntimeInSeconds": 7200},
            "exceeded its maximum run time, MaxRuntimeInSeconds = 7200 s",
        ),
        (
            "MaxWaitTimeExceeded",
            {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 5400},
            "MaxWaitTimeInSeconds = 5400 s; raise max_wait",
        ),
    ],
)
def test_limit_stops_get_their_own_message(secondary: str, condition: dict[str, int], expected: str) -> None:
    describe = {
        "TrainingJobName": "limited",
        "TrainingJobStatus": "Stopped",
        "SecondaryStatus": secondary,
        "StoppingCondition": condition,
    }
    with pytest.raises(TrainingJobLimitError, match=rf"limited was stopped by SageMaker \({secondary}\)") as info:
        resolve_outcome(describe)
    assert expected in str(info.value)
    assert resolve_outcome(describe, fail_on_stopped=False)["status"] == "Stopped"
    failed = {**describe, "TrainingJobStatus": "Failed", "FailureReason": "ClientError: limit"}
    with pytest.raises(Exception, match=expected.split(";", maxsplit=1)[0].replace("(", r"\(")):
        resolve_outcome(failed)
