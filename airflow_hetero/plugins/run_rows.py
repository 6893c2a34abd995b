"""One run's row of the Runs view from its XComs (pure): what the training task and its summary task pushed, each
part read with the checks of :mod:`airflow_hetero.logs.accessors`, each gap said in ``missing``.

Where two tasks say the same thing, the one closer to the fact wins: the training task's result for the cluster
that ran and the run's length, the summary for the job's final status, cost and verdict, the training task's own
``rightsizing`` key for the decision the run was made with (the summary's is the next run's).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_hetero.amounts import format_amount
from airflow_hetero.job.rightsizing_decision import group_decision_of
from airflow_hetero.logs.accessors import (
    capacity_attempts_of,
    cost_of,
    groups_of,
    is_skeleton,
    queue_attempts_of,
    verdict_of,
)
from airflow_hetero.logs.report import capacity_lines
from airflow_hetero.logs.shape import CapacityAttempt, Cost, CostHeadline, QueueAttempts, Verdict, VerdictHeadline
from airflow_hetero.plugins.runs_model import (
    ENDED_BADLY,
    MARKER_KINDS,
    MOVES,
    DecisionRow,
    GroupRow,
    Marker,
    RunRow,
    RunXComs,
    TaskPair,
    summary_of,
)
from airflow_hetero.xcom_keys import (
    BUDGET_STOP_XCOM_KEY,
    CAPACITY_ATTEMPTS_XCOM_KEY,
    COST_XCOM_KEY,
    JOB_NAME_XCOM_KEY,
    RESULT_XCOM_KEY,
    RIGHTSIZING_XCOM_KEY,
    SERVICE_JOB_XCOM_KEY,
    VERDICT_XCOM_KEY,
)

#: SecondaryStatus of a job SageMaker stopped at one of its limits.
LIMIT_STOPS = frozenset({"MaxRuntimeExceeded", "MaxWaitTimeExceeded"})


def _map(value: Any) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class Pushed:
    """What a run's two tasks pushed, each part read (None or empty: not pushed, or not readable)."""

    result: Mapping[str, Any] | None  # the training task's result dict
    summary: Mapping[str, Any] | None  # the summary task's result: the summary (or its skeleton)
    job: str | None
    attempts: list[CapacityAttempt]
    service: Mapping[str, Any] | None
    queue: QueueAttempts | None
    decision: Mapping[str, Any] | None
    budget_stop: Mapping[str, Any] | None
    cost: Cost | CostHeadline | None
    verdict: Verdict | VerdictHeadline | None

    @classmethod
    def of(cls, run: RunXComs, pair: TaskPair) -> Pushed:
        """The parts of ``run``'s XComs, the training task's and the summary task's of ``pair``."""

        def get(task: str | None, key: str) -> Any:
            return run.values.get((task, key)) if task else None

        result = _map(get(pair.training, RESULT_XCOM_KEY))
        summary = summary_of(get(pair.summary, RESULT_XCOM_KEY))
        job = _text(get(pair.training, JOB_NAME_XCOM_KEY)) or _text((result or {}).get("training_job_name"))
        attempts = next(
            (
                found
                for found in (
                    capacity_attempts_of(summary or {}),
                    capacity_attempts_of({"capacity_attempts": get(pair.training, CAPACITY_ATTEMPTS_XCOM_KEY)}),
                    capacity_attempts_of(result or {}),
                )
                if found
            ),
            [],
        )
        cost = cost_of(summary or {}) or cost_of({"cost": get(pair.summary, COST_XCOM_KEY)})
        verdict = verdict_of(summary or {}) or verdict_of({"verdict": get(pair.summary, VERDICT_XCOM_KEY)})
        return cls(
            result,
            summary,
            job or _text((summary or {}).get("training_job_name")),
            attempts,
            _map((result or {}).get("service_job")) or _map(get(pair.training, SERVICE_JOB_XCOM_KEY)),
            queue_attempts_of(summary or {}),
            _map(get(pair.training, RIGHTSIZING_XCOM_KEY)) or _map((result or {}).get("rightsizing")),
            _map(get(pair.training, BUDGET_STOP_XCOM_KEY)),
            cost,
            verdict,
        )

    def first(self, key: str) -> Any:
        """``key`` of the summary (the job as read last), else of the training task's result."""
        for part in (self.summary, self.result):
            if part is not None and part.get(key) is not None:
                return part[key]
        return None


def run_row(run: RunXComs, pair: TaskPair) -> RunRow:
    """The row of one run (see the module docstring)."""
    pushed = Pushed.of(run, pair)
    row = RunRow(run.run_id, run.date, run.state, job=pushed.job)
    row.status, row.failure_reason = _text(pushed.first("status")), _text(pushed.first("failure_reason"))
    row.seconds = _run_seconds(pushed)
    row.groups = _groups(pushed)
    if pushed.cost is not None:
        row.currency = pushed.cost["currency"]
        row.cost, row.waiting_cost = pushed.cost.get("total"), pushed.cost.get("waiting")
        row.spot_saving = _number(pushed.cost.get("spot_saving"))
    verdict = pushed.verdict
    if verdict is not None:
        row.verdict, row.verdict_kind, row.bottleneck = (
            verdict.get("message"),
            verdict.get("kind"),
            verdict.get("bottleneck"),
        )
    row.decision = decision_row(pushed.decision) if pushed.decision is not None else None
    row.fallback = bool(pushed.attempts)
    row.markers = _markers(run, pushed, row)
    row.missing = _missing(pair, pushed)
    return row


def _run_seconds(pushed: Pushed) -> float | None:
    """The job's training time (the training task's result, else the summary's, else its training window)."""
    for part in (pushed.result, pushed.summary):
        seconds = _number((part or {}).get("training_seconds"))
        if seconds is not None:
            return seconds
    window = _map((pushed.summary or {}).get("training_window"))
    return _number((window or {}).get("seconds"))


def _groups(pushed: Pushed) -> list[GroupRow]:
    """Each group's cluster (the result's: the job that ran; else the summary's) and what it cost."""
    rows: dict[str, GroupRow] = {}
    for group in (pushed.result or {}).get("instance_groups") or []:
        if isinstance(group, Mapping) and isinstance(group.get("name"), str):
            count = group.get("count")
            kind = _text(group.get("type"))
            rows[group["name"]] = GroupRow(group["name"], kind, count if isinstance(count, int) else None)
    for name, group in groups_of(pushed.summary or {}).items():
        row = rows.setdefault(name, GroupRow(name, None, None))
        row.type = row.type or _text(group.get("instance_type"))
        count = group.get("instance_count")
        row.count = row.count if row.count is not None else count if isinstance(count, int) else None
    if pushed.cost is not None and "groups" in pushed.cost:
        for name, spent in pushed.cost["groups"].items():
            row = rows.setdefault(name, GroupRow(name, spent["instance_type"], spent["instance_count"]))
            row.cost, row.waiting_cost = spent["cost"], spent["waiting_cost"]
            row.instance_seconds, row.price_per_hour = spent["instance_seconds"], spent["price_per_hour"]
    return list(rows.values())


def decision_row(decision: Mapping[str, Any]) -> DecisionRow:
    """The decision a run was made with in one line: the change it applied (or recommended) and why, an undo
    said as one; else what it kept. A decision in short (the result's, without reasons) says what it can."""
    mode = str(decision.get("mode") or "?")
    verb = "applied" if mode == "apply" else "recommended"
    kept = [g for g in decision.get("groups") or [] if isinstance(g, Mapping) and "next_count" in g]
    moving = [group_decision_of(g) for g in kept if g.get("action") in MOVES]
    if moving:
        change = moving[0]  # one change per run
        undo = change.action == "undone"
        head = f"undo {verb}" if undo else verb
        return DecisionRow(mode, f"{head}: {change.group} {change.move}: {change.reason}", change.action)
    actions = _map(decision.get("actions")) or {}
    short = [g for g, action in actions.items() if action in MOVES]
    if short:  # the result's short form: what moved, not why
        to = _map(decision.get("recommended")) or {}
        undo = any(actions[g] == "undone" for g in short)
        moves = ", ".join(f"{g} -> {to.get(g, '?')}" for g in short)
        return DecisionRow(mode, f"{'undo ' if undo else ''}{verb}: {moves}", "undone" if undo else "changed")
    held = [group_decision_of(g) for g in kept if str(g.get("action")).startswith("refused")]
    if held:
        return DecisionRow(mode, f"{mode}: {held[0].group} held at {held[0].count}: {held[0].reason}", "held")
    counts = ", ".join(f"{g}={n}" for g, n in (_map(decision.get("counts")) or {}).items())
    evidence = decision.get("evidence")
    said = f" ({evidence} run(s) of evidence)" if isinstance(evidence, int) else ""
    return DecisionRow(mode, f"{mode}: kept {counts or 'the counts'}{said}", "kept")


def _markers(run: RunXComs, pushed: Pushed, row: RunRow) -> list[Marker]:
    """The run's markers, in :data:`~airflow_hetero.plugins.runs_model.MARKER_KINDS` order."""
    markers: list[Marker] = []
    secondary = _text(pushed.first("secondary_status"))
    if pushed.budget_stop is not None:
        said = _text(pushed.budget_stop.get("message")) or "SageMaker stopped the job at the budget's runtime cap"
        markers.append(Marker("budget", f"budget stop: {said}"))
    elif row.status == "Stopped" and secondary in LIMIT_STOPS:
        markers.append(Marker("limit", f"stopped by SageMaker at its limit ({secondary})"))
    elif row.status in ENDED_BADLY or (pushed.result is None and run.state == "failed"):
        why = row.failure_reason or (
            f"the job ended {row.status}" if row.status else "the training task ended without a result"
        )
        markers.append(Marker("failed", f"failed: {why}"))
    if pushed.attempts:
        markers.append(Marker("capacity", _fallback_text(pushed.attempts, row)))
    if pushed.cost is not None and "groups" in pushed.cost and pushed.cost["spot"] is not None:
        markers.append(Marker("spot", _spot_text(pushed, row)))
    if pushed.service is not None or pushed.queue is not None:
        row.queued_seconds, row.queue_attempts = _queue_figures(pushed)
        markers.append(Marker("queue", _queue_text(row, pushed)))
    return sorted(markers, key=lambda m: MARKER_KINDS.index(m.kind))


def _cluster(groups: list[GroupRow]) -> str:
    return ", ".join(f"{g.name}={g.count if g.count is not None else '?'} x {g.type or '?'}" for g in groups)


def _fallback_text(attempts: list[CapacityAttempt], row: RunRow) -> str:
    """``capacity fallback: train_group fell back ... (1 attempt failed: CapacityError); ran <cluster>``."""
    if not row.groups or (row.job is None and row.status is None):
        codes = ", ".join(a["reason"].split(":", 1)[0] for a in attempts)
        return f"capacity: no cluster ran ({len(attempts)} attempt{'s' * (len(attempts) > 1)} failed: {codes})"
    ran = {g.name: {"instance_type": g.type, "instance_count": g.count} for g in row.groups}
    said = " ".join(line.strip() for line in capacity_lines({"capacity_attempts": attempts, "groups": ran}))
    return f"capacity fallback: {said.removeprefix('Capacity: ')}; ran {_cluster(row.groups)}"


def _spot_text(pushed: Pushed, row: RunRow) -> str:
    """``spot: saved 41 % (0.12 USD), 2 interruptions``: the summary's spot saving and the job's interruptions."""
    timeline = (pushed.summary or {}).get("timeline")
    steps = [s for s in timeline if isinstance(s, Mapping)] if isinstance(timeline, list) else []
    interruptions = sum(1 for step in steps if step.get("status") == "Interrupted")
    parts = []
    saving = row.spot_saving
    if saving is not None and row.cost is not None and saving + row.cost > 0:
        parts.append(f"saved {percent(saving / (saving + row.cost))} ({format_amount(saving)} {row.currency})")
    parts.append(f"{interruptions} interruption{'' if interruptions == 1 else 's'}")
    return "spot: " + ", ".join(parts)


def _queue_figures(pushed: Pushed) -> tuple[float | None, int | None]:
    """(the wait in the queue, the attempts): the service job's, else the summary's attempts."""
    service, queue = pushed.service or {}, pushed.queue
    attempts = service.get("attempts")
    count = len(queue["attempts"]) if queue else len(attempts) if isinstance(attempts, list) else None
    return _number(service.get("queued_seconds")), count or None


def _queue_text(row: RunRow, pushed: Pushed) -> str:
    """``queue gpu-queue: waited 4 min 10 s, 2 attempts, all attempts 0.31 USD``."""
    service, queue = pushed.service or {}, pushed.queue
    where = _text(service.get("job_queue")) or (queue["job_queue"] if queue else None) or ""
    name = where.rsplit("/", 1)[-1]
    parts = []
    if row.queued_seconds is not None:
        parts.append(f"waited {duration_text(row.queued_seconds)}")
    if row.queue_attempts:
        parts.append(f"{row.queue_attempts} attempt{'' if row.queue_attempts == 1 else 's'}")
    if queue is not None:
        parts.append(f"all attempts {format_amount(queue['total'])} {queue['currency']}")
    return f"queue {name}".rstrip() + (": " + ", ".join(parts) if parts else "")


def percent(share: float) -> str:
    """``41 %``: a share as the Runs view says it."""
    return f"{share * 100:.0f} %"


def duration_text(seconds: float) -> str:
    """``45 s``, ``4 min 10 s``, ``2 h 5 min``: a run's or a wait's length."""
    whole = round(seconds)
    if whole < 120:
        return f"{seconds:.3g} s" if seconds < 10 else f"{whole} s"
    if whole < 7200:
        minutes, rest = divmod(whole, 60)
        return f"{minutes} min" + (f" {rest} s" if rest else "")
    hours, rest = divmod(whole // 60, 60)
    return f"{hours} h" + (f" {rest} min" if rest else "")


def _missing(pair: TaskPair, pushed: Pushed) -> list[str]:
    """What the run lacks that the view would show."""
    missing = []
    if pushed.result is None and pushed.job is not None:
        missing.append("no result from the training task (it failed, or still runs)")
    if pair.summary is not None and pushed.summary is None and pushed.cost is None and pushed.verdict is None:
        missing.append("no summary (the summary task did not run, or pushed none)")
    elif pushed.summary is not None and is_skeleton(pushed.summary):
        missing.append("summary cut to its skeleton to fit max_xcom_bytes: no cost, no verdict")
    elif pushed.summary is not None and pushed.cost is None:
        missing.append("no cost in the summary (no price for its instance types)")
    elif pushed.cost is not None and "groups" not in pushed.cost:
        missing.append("cost per group cut to fit max_xcom_bytes: the total only")
    return missing
