"""The training operator's right-sizing (``rightsizing=``, docs/rightsizing.md): the check at DAG parse and the
decision of a run (the pipeline's :class:`~airflow_hetero.operators.pipeline.RightSize` step).

At DAG parse the policy is checked (:func:`check_rightsizing`), against the job too when both are plain data.
When the task runs, :func:`rightsized` reads the evidence from Airflow's own metadata: this task's decision of
the latest earlier run (XCom ``rightsizing``, holding the evidence it rested on) and the record the summary task
made of that run (XCom ``rightsizing_record``, see
:func:`~airflow_hetero.operators.rightsizing_records.record_next`); decides
(:func:`airflow_hetero.job.rightsizing.decide`); logs one line per group; pushes the decision and keeps it in the
run; and, in ``apply`` mode, returns the job with the decided counts, so the capacity fallback and the budget see
the cluster that is sent. Importing this module loads nothing beyond the typing names; the policy's model loads
only for a task that has one.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_hetero._compat import AirflowFailException
from airflow_hetero.operators.task_settings import SubmitSettings
from airflow_hetero.xcom_keys import RECORD_XCOM_KEY, RIGHTSIZING_XCOM_KEY

if TYPE_CHECKING:
    from airflow_hetero.definition.rightsizing import RightSizing
    from airflow_hetero.definition.submittable import Submittable
    from airflow_hetero.operators.run_state import TrainingRun

__all__ = ["RECORD_XCOM_KEY", "RIGHTSIZING_XCOM_KEY", "check_rightsizing", "rightsized"]


def _templated(value: Any) -> bool:
    text = repr(value)
    return "{{" in text or "{%" in text


#: What right-sizing reads of the training operator.
RightSizedTask = SubmitSettings


def check_rightsizing(
    value: Any, source: Mapping[str, Any] | str | None, *, request: bool, fallbacks: Any
) -> dict[str, Any] | None:
    """The policy as plain data (a template field), checked now unless it holds Jinja, and against the job
    ``source`` when that is plain data too (a ValueError naming the field fails the DAG's parse)."""
    if value is None:
        return None
    from airflow_hetero.definition.rightsizing import RightSizing, check_policy, groups_of_source

    data = value.as_dict() if isinstance(value, RightSizing) else value
    if not isinstance(data, Mapping):
        raise ValueError(f"rightsizing: a RightSizing or a dict, got {type(value).__name__}")
    if _templated(data):
        return dict(data)  # checked once rendered
    policy = RightSizing.of(data)
    if isinstance(source, Mapping) and not _templated(source) and not _templated(fallbacks):
        known = fallbacks if isinstance(fallbacks, Mapping) else None
        check_policy(policy, groups_of_source(source, request=request, fallbacks=known))
    return dict(data)


def rightsized(task: RightSizedTask, run: TrainingRun, job: Submittable) -> Submittable:
    """``job`` as this run submits it: with the decided counts in ``apply`` mode, as it is otherwise. Decides
    once per try: a resumed task reuses the decision it pushed."""
    from airflow_hetero.definition.rightsizing import CountedJob

    ti: Any = run.context["ti"]
    decision = ti.xcom_pull(task_ids=task.task_id, key=RIGHTSIZING_XCOM_KEY)  # this run's, when resumed
    if not isinstance(decision, Mapping) or decision.get("run_id") != ti.run_id:
        decision = decide_now(task, run)
        ti.xcom_push(key=RIGHTSIZING_XCOM_KEY, value=decision)
    run.decision = dict(decision)
    if decision.get("mode") != "apply":
        return job
    counts, types = decision.get("counts") or {}, decision.get("types") or {}
    return CountedJob(job, {str(g): int(n) for g, n in counts.items()}, {str(g): str(t) for g, t in types.items()})


def rightsizing_policy(task: RightSizedTask) -> RightSizing:
    """The rendered policy, checked against the rendered job (a problem fails the task, no retry)."""
    from airflow_hetero.definition.rightsizing import RightSizing, RightSizingError, check_policy

    try:
        policy = RightSizing.of(task.rightsizing or {})
        check_policy(policy, job_groups(task))
    except RightSizingError as err:
        raise AirflowFailException(f"Task {task.task_id}: {err}") from err
    return policy


def job_groups(task: RightSizedTask) -> dict[str, Any]:
    """The rendered job's groups (:class:`~airflow_hetero.definition.rightsizing.GroupFacts`)."""
    from airflow_hetero.definition.rightsizing import groups_of_source

    source = task.job if task.request is None else task.request
    fallbacks = task.fallback_instance_types if isinstance(task.fallback_instance_types, Mapping) else None
    data = source if isinstance(source, Mapping) else {}
    return groups_of_source(data, request=task.request is not None, fallbacks=fallbacks)


def fingerprint(task: RightSizedTask, managed: list[str]) -> str:
    """The job as written (a file: its text, read from the DAG's folder), without the managed counts."""
    from airflow_hetero.definition.rightsizing import definition_fingerprint

    source = task.rightsizing_source
    if isinstance(source, str) and not Path(source).is_absolute():
        source = str(task.base_dir() / source)
    return definition_fingerprint(source or {}, managed, request=task.request is not None)


def summary_task_id(task: RightSizedTask, policy: RightSizing) -> str:
    """The task recording each run: the policy's ``summary_task_id``, else the DAG's summary of this task."""
    if policy.summary_task_id:
        return policy.summary_task_id
    found = task.summary_candidates
    if len(found) != 1:
        raise AirflowFailException(
            f"Task {task.task_id}: rightsizing reads each run's record from a HeteroLogSummaryOperator with "
            f"training_task_id={task.task_id!r}; the DAG has {len(found) or 'none'} (set summary_task_id)"
        )
    return str(found[0])


def decide_now(task: RightSizedTask, run: TrainingRun) -> dict[str, Any]:
    """Read the evidence, decide, log, and return the decision as plain JSON (see the module docstring)."""
    from airflow_hetero._compat import latest_xcom
    from airflow_hetero.job.budget import BudgetError, check_max_cost
    from airflow_hetero.job.rightsizing import decide
    from airflow_hetero.job.rightsizing_types import type_inputs
    from airflow_hetero.operators.rightsizing_records import earlier, evidence, state_of

    ti: Any = run.context["ti"]
    policy = rightsizing_policy(task)
    groups = job_groups(task)
    print_ = fingerprint(task, sorted(policy.groups))
    written = {g: groups[g].instance_count for g in policy.groups}
    summary_id = summary_task_id(task, policy)
    previous = earlier(latest_xcom(ti, task.task_id, RIGHTSIZING_XCOM_KEY), ti.run_id)
    record = earlier(latest_xcom(ti, summary_id, RECORD_XCOM_KEY), ti.run_id)
    history, reset, counts, blocked = evidence(previous, record, print_, written, policy.mode)
    try:
        max_cost = check_max_cost(task.max_cost)
    except BudgetError as err:
        raise AirflowFailException(f"Task {task.task_id}: budget: {err}") from err
    written_types, types, facts = type_inputs(policy, groups, previous, print_)
    prices = rightsizing_prices(task, run, sorted(facts))
    decision = decide(
        policy,
        counts,
        history,
        fingerprint=print_,
        prices=prices,
        max_cost=max_cost,
        blocked=blocked,
        reset=reset,
        types=types,
        facts=facts,
        written_types=written_types,
    )
    decision.run_id = ti.run_id
    task.log.info("%s", "\n".join(decision.lines()))
    extra = {"written_types": written_types, "facts": facts}
    return state_of(decision.as_dict(), policy, max_cost, prices, written, extra=extra)


def rightsizing_prices(task: RightSizedTask, run: TrainingRun, types: list[str]) -> dict[str, float]:
    """Price per instance-hour of ``types`` (the task's price settings, then the Price List); those not found
    are left out (the decision says what it could not weigh)."""
    try:
        found = run.hook.training_prices(types, task.price_settings)
    except Exception as exc:  # a decision without prices still holds the bounds and the hysteresis
        task.log.warning("Right-sizing: could not price %s: %s", ", ".join(types), exc)
        return {}
    return {t: float(p.per_hour) for t, p in found.items() if p.per_hour is not None}


def decision_in_short(decision: Mapping[str, Any]) -> dict[str, Any]:
    """A run's decision in short, for the task's result dict (``rightsizing``)."""
    return {
        "mode": decision.get("mode"),
        "counts": decision.get("counts"),
        "recommended": decision.get("recommended"),
        "types": decision.get("types"),
        "recommended_types": decision.get("recommended_types"),
        "actions": {g["group"]: g["action"] for g in decision.get("groups") or []},
    }


def restore_decision(task: RightSizedTask, run: TrainingRun) -> None:
    """After a deferral: this run's decision, as pushed before it (for the result's short form)."""
    if task.rightsizing is None:
        return
    ti: Any = run.context["ti"]
    decision = ti.xcom_pull(task_ids=task.task_id, key=RIGHTSIZING_XCOM_KEY)
    if isinstance(decision, Mapping) and decision.get("run_id") == ti.run_id:
        run.decision = dict(decision)
