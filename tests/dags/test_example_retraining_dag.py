"""The shipped retraining DAG's own logic, without running a job: a failed job is still summarised (the
summary is what a person needs most then, and what the Runs view shows of a failed run), and the gate says
that the job failed rather than judging a model that does not exist."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException


@pytest.fixture(scope="module")
def dag() -> Any:
    return importlib.import_module("airflow_hetero.example_dags.hetero_retraining_dag").dag


def summary(status: str, loss: float | None = 0.01, reason: str | None = None) -> dict[str, Any]:
    metrics = {} if loss is None else {"train:loss": {"last": loss}}
    return {
        "training_job_name": "hetero-retrain-1",
        "status": status,
        "failure_reason": reason,
        "groups": {"data_group": {"errors": 0, "metrics": {}}, "train_group": {"errors": 0, "metrics": metrics}},
    }


def test_the_summary_runs_whatever_the_training_task_ended_with(dag: Any) -> None:
    summarize = dag.get_task("summarize")
    assert str(summarize.trigger_rule) in ("all_done", "TriggerRule.ALL_DONE")
    assert summarize.upstream_task_ids == {"train"}
    assert dag.get_task("gate").upstream_task_ids == {"summarize"}


def test_the_gate_names_a_failed_job_and_its_reason(dag: Any) -> None:
    gate = dag.get_task("gate").python_callable
    with pytest.raises(AirflowFailException, match=r"^training job hetero-retrain-1 ended Failed: AlgorithmError: x$"):
        gate(summary("Failed", loss=None, reason="AlgorithmError: x"), params={"max_final_loss": 0.05})


def test_the_gate_passes_a_converged_model_and_rejects_one_that_did_not(dag: Any) -> None:
    gate = dag.get_task("gate").python_callable
    assert gate(summary("Completed"), params={"max_final_loss": 0.05}) == {
        "training_job_name": "hetero-retrain-1",
        "final_loss": 0.01,
    }
    with pytest.raises(AirflowFailException, match=r"model rejected: final train:loss 0.5 is above 0.05"):
        gate(summary("Completed", loss=0.5), params={"max_final_loss": 0.05})
