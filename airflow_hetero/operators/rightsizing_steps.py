"""The training operator's right-sizing (``rightsizing=``): a mixin of
:class:`~airflow_hetero.operators.training.HeteroTrainingOperator` (docs/rightsizing.md).

At DAG parse the policy is checked (:meth:`RightSizingMixin.set_rightsizing`), against the job too when both
are plain data. When the task runs, :meth:`~RightSizingMixin.rightsize` reads the evidence from Airflow's own
metadata: this task's decision of the latest earlier run (XCom ``rightsizing``, holding the evidence it rested
on) and the record the summary task made of that run (XCom ``rightsizing_record``, see
:func:`~airflow_hetero.operators.rightsizing_records.record_next`); decides
(:func:`airflow_hetero.job.rightsizing.decide`); logs one line per group;
pushes the decision; and, in ``apply`` mode, returns the job with the decided counts, so the capacity
fallback and the budget see the cluster that is sent. Importing this module loads nothing beyond the typing
names; the policy's model loads only for a task that has one.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_hetero._compat import AirflowFailException

if TYPE_CHECKING:
    from airflow_hetero._compat import Context
    from airflow_hetero.definition.rightsizing import RightSizing
    from airflow_hetero.definition.submittable import Submittable
    from airflow_hetero.hooks.training import HeteroTrainingHook
    from airflow_hetero.pricing.settings import PriceSettings

#: XCom key of a run's right-sizing decision: on the training task, the decision this run was made with; on
#: the summary task, the decision the next run would be made with (also in its ``return_value``).
RIGHTSIZING_XCOM_KEY = "rightsizing"
#: XCom key of the summary task's record of its run (the evidence the next run reads).
RECORD_XCOM_KEY = "rightsizing_record"


def _templated(value: Any) -> bool:
    text = repr(value)
    return "{{" in text or "{%" in text


class RightSizingMixin:
    """``rightsizing=`` of the training operator: the check at parse, the decision when the task runs."""

    task_id: str
    log: Any
    job: Mapping[str, Any] | str | None
    request: Mapping[str, Any] | str | None
    fallback_instance_types: Any
    max_cost: Any
    price_settings: PriceSettings
    rightsizing: dict[str, Any] | None
    rightsizing_source: Mapping[str, Any] | str | None  # the job as written (unrendered): its fingerprint
    rightsizing_decision: dict[str, Any] | None

    if TYPE_CHECKING:  # the operator's (a placeholder here would win over AwsSettings' in the MRO)

        def base_dir(self) -> Path: ...

        def make_hook(self) -> HeteroTrainingHook: ...

    def set_rightsizing(self, value: Any) -> None:
        """Keep the policy as plain data (a template field); check it now unless it holds Jinja, and against
        the job when the job is plain data too (a ValueError naming the field fails the DAG's parse)."""
        self.rightsizing_decision = None
        self.rightsizing_source = self.job if self.job is not None else self.request
        if value is None:
            self.rightsizing = None
            return
        from airflow_hetero.definition.rightsizing import RightSizing, check_policy, groups_of_source

        data = value.as_dict() if isinstance(value, RightSizing) else value
        if not isinstance(data, Mapping):
            raise ValueError(f"rightsizing: a RightSizing or a dict, got {type(value).__name__}")
        self.rightsizing = dict(data)
        if _templated(data):
            return  # checked once rendered
        policy = RightSizing.of(data)
        source = self.rightsizing_source
        if isinstance(source, Mapping) and not _templated(source) and not _templated(self.fallback_instance_types):
            fallbacks = self.fallback_instance_types if isinstance(self.fallback_instance_types, Mapping) else None
            check_policy(policy, groups_of_source(source, request=self.request is not None, fallbacks=fallbacks))

    def rightsize(self, job: Submittable, context: Context) -> Submittable:
        """``job`` as this run submits it: with the decided counts in ``apply`` mode, as it is otherwise (and
        without a policy). Decides once per try: a resumed task reuses the decision it pushed."""
        if self.rightsizing is None:
            return job
        from airflow_hetero.definition.rightsizing import CountedJob

        ti: Any = context["ti"]
        decision = ti.xcom_pull(task_ids=self.task_id, key=RIGHTSIZING_XCOM_KEY)  # this run's, when resumed
        if not isinstance(decision, Mapping) or decision.get("run_id") != ti.run_id:
            decision = self.decide_now(context)
            ti.xcom_push(key=RIGHTSIZING_XCOM_KEY, value=decision)
        self.rightsizing_decision = dict(decision)
        if decision.get("mode") != "apply":
            return job
        counts, types = decision.get("counts") or {}, decision.get("types") or {}
        return CountedJob(job, {str(g): int(n) for g, n in counts.items()}, {str(g): str(t) for g, t in types.items()})

    def rightsizing_policy(self) -> RightSizing:
        """The rendered policy, checked against the rendered job (a problem fails the task, no retry)."""
        from airflow_hetero.definition.rightsizing import RightSizing, RightSizingError, check_policy

        try:
            policy = RightSizing.of(self.rightsizing or {})
            check_policy(policy, self.job_groups())
        except RightSizingError as err:
            raise AirflowFailException(f"Task {self.task_id}: {err}") from err
        return policy

    def job_groups(self) -> dict[str, Any]:
        """The rendered job's groups (:class:`~airflow_hetero.definition.rightsizing.GroupFacts`)."""
        from airflow_hetero.definition.rightsizing import groups_of_source

        source = self.job if self.request is None else self.request
        fallbacks = self.fallback_instance_types if isinstance(self.fallback_instance_types, Mapping) else None
        data = source if isinstance(source, Mapping) else {}
        return groups_of_source(data, request=self.request is not None, fallbacks=fallbacks)

    def fingerprint(self, managed: list[str]) -> str:
        """The job as written (a file: its text, read from the DAG's folder), without the managed counts."""
        from airflow_hetero.definition.rightsizing import definition_fingerprint

        source = self.rightsizing_source
        if isinstance(source, str) and not Path(source).is_absolute():
            source = str(self.base_dir() / source)
        return definition_fingerprint(source or {}, managed, request=self.request is not None)

    def summary_task_id(self, policy: RightSizing) -> str:
        """The task recording each run: the policy's ``summary_task_id``, else the DAG's summary of this task."""
        if policy.summary_task_id:
            return policy.summary_task_id
        has_dag: Any = getattr(self, "has_dag", None)  # the DAG, when the task is in one (both versions raise else)
        dag: Any = getattr(self, "dag", None) if callable(has_dag) and has_dag() else None
        found = [t.task_id for t in getattr(dag, "tasks", []) if getattr(t, "training_task_id", None) == self.task_id]
        if len(found) != 1:
            raise AirflowFailException(
                f"Task {self.task_id}: rightsizing reads each run's record from a HeteroLogSummaryOperator with "
                f"training_task_id={self.task_id!r}; the DAG has {len(found) or 'none'} (set summary_task_id)"
            )
        return str(found[0])

    def decide_now(self, context: Context) -> dict[str, Any]:
        """Read the evidence, decide, log, and return the decision as plain JSON (see the module docstring)."""
        from airflow_hetero._compat import latest_xcom
        from airflow_hetero.job.budget import BudgetError, check_max_cost
        from airflow_hetero.job.rightsizing import decide
        from airflow_hetero.job.rightsizing_types import type_inputs
        from airflow_hetero.operators.rightsizing_records import earlier, evidence, state_of

        ti: Any = context["ti"]
        policy = self.rightsizing_policy()
        groups = self.job_groups()
        fingerprint = self.fingerprint(sorted(policy.groups))
        written = {g: groups[g].instance_count for g in policy.groups}
        summary_id = self.summary_task_id(policy)
        previous = earlier(latest_xcom(ti, self.task_id, RIGHTSIZING_XCOM_KEY), ti.run_id)
        record = earlier(latest_xcom(ti, summary_id, RECORD_XCOM_KEY), ti.run_id)
        history, reset, counts, blocked = evidence(previous, record, fingerprint, written, policy.mode)
        try:
            max_cost = check_max_cost(self.max_cost)
        except BudgetError as err:
            raise AirflowFailException(f"Task {self.task_id}: budget: {err}") from err
        written_types, types, facts = type_inputs(policy, groups, previous, fingerprint)
        prices = self.rightsizing_prices(sorted(facts))
        decision = decide(
            policy,
            counts,
            history,
            fingerprint=fingerprint,
            prices=prices,
            max_cost=max_cost,
            blocked=blocked,
            reset=reset,
            types=types,
            facts=facts,
            written_types=written_types,
        )
        decision.run_id = ti.run_id
        self.log.info("%s", "\n".join(decision.lines()))
        extra = {"written_types": written_types, "facts": facts}
        return state_of(decision.as_dict(), policy, max_cost, prices, written, extra=extra)

    def rightsizing_prices(self, types: list[str]) -> dict[str, float]:
        """Price per instance-hour of ``types`` (the operator's price settings, then the Price List); those not
        found are left out (the decision says what it could not weigh)."""
        try:
            found = self.make_hook().training_prices(types, self.price_settings)
        except Exception as exc:  # a decision without prices still holds the bounds and the hysteresis
            self.log.warning("Right-sizing: could not price %s: %s", ", ".join(types), exc)
            return {}
        return {t: float(p.per_hour) for t, p in found.items() if p.per_hour is not None}

    def with_attempts(self, result: dict[str, Any]) -> dict[str, Any]:
        """The capacity fallback's result dict, with this run's decision in short (:meth:`with_rightsizing`)."""
        parent: Any = super()
        return self.with_rightsizing(parent.with_attempts(result))

    def with_rightsizing(self, result: dict[str, Any]) -> dict[str, Any]:
        """The result dict with this run's decision in short (``rightsizing``), when there is one."""
        if self.rightsizing_decision is not None:
            d = self.rightsizing_decision
            result["rightsizing"] = {
                "mode": d.get("mode"),
                "counts": d.get("counts"),
                "recommended": d.get("recommended"),
                "types": d.get("types"),
                "recommended_types": d.get("recommended_types"),
                "actions": {g["group"]: g["action"] for g in d.get("groups") or []},
            }
        return result
