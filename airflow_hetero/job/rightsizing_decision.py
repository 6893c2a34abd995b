"""A right-sizing decision as the task log, XCom, the Instance groups view and ``airflow-hetero render`` state it
(pure; docs/rightsizing.md): each managed group's :class:`GroupDecision` (its action, counts and types now and
next, why, the figures behind it), the run's :class:`Decision`, and :func:`next_run_lines` for a decision kept as
plain JSON."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from airflow_hetero.amounts import format_amount
from airflow_hetero.job.rightsizing_evidence import as_map

__all__ = ["ACTIONS", "Action", "Decision", "GroupDecision", "group_decision_of", "next_run_lines"]

Action = Literal["kept", "changed", "undone", "refused_bound", "refused_budget"]
#: Every action a group decision may take.
ACTIONS: tuple[Action, ...] = ("kept", "changed", "undone", "refused_bound", "refused_budget")


@dataclass
class GroupDecision:
    """One managed group's decision: its count now and next, why, and the figures behind it."""

    group: str
    action: Action
    count: int
    next_count: int
    reason: str
    signals: list[str] = field(default_factory=list)  # the latest records' signals, oldest first
    figures: dict[str, Any] = field(default_factory=dict)
    type: str | None = None  # the group's instance type now (None: types not followed)
    next_type: str | None = None  # and next: another only when the decision moves the group's type

    @property
    def moves(self) -> bool:
        """Whether the decision changes the group's count or its type."""
        return self.next_count != self.count or self.next_type != self.type

    @property
    def target(self) -> str:
        """What the group would go to: its next count, or its next type."""
        return str(self.next_type) if self.next_type != self.type else str(self.next_count)

    @property
    def move(self) -> str:
        """``2 -> 4``, ``1 x ml.g5.xlarge -> 1 x ml.g5.2xlarge``, or the count kept (``2``)."""
        if self.next_type is not None and self.next_type != self.type:
            return f"{self.count} x {self.type} -> {self.count} x {self.next_type}"
        return f"{self.count} -> {self.next_count}" if self.next_count != self.count else f"{self.count}"

    def line(self) -> str:
        """The decision as one line of the task log."""
        move = self.move
        numbers = ", ".join(f"{k}={_short(k, v)}" for k, v in self.figures.items())
        return f"{self.group}: {self.action} ({move}): {self.reason}" + (f" [{numbers}]" if numbers else "")


#: The figures that are amounts of money (printed by :func:`~airflow_hetero.amounts.format_amount`).
MONEY_FIGURES = frozenset(
    {
        "cost",
        "cost_before",
        "cost_per_run",
        "cost_per_run_after",
        "max_cost",
        "worst_case",
        "price_per_hour",
        "price_per_hour_after",
    }
)


def _short(name: str, value: Any) -> str:
    """A figure of the decision's line: an amount as every amount prints, another float in 4 digits."""
    if isinstance(value, int | float) and not isinstance(value, bool) and name in MONEY_FIGURES:
        return format_amount(value)
    return f"{value:.4g}" if isinstance(value, float) else str(value)


@dataclass
class Decision:
    """The decision for one run: per group, the counts this run uses and the counts recommended, the
    evidence kept (``history``) and the counts that were undone (``blocked``)."""

    mode: str
    objective: str
    fingerprint: str | None
    counts: dict[str, int]  # what this run uses (apply: the decided counts; recommend: the definition's)
    recommended: dict[str, int]  # what the decision says the managed groups should run
    groups: list[GroupDecision]
    evidence: int  # records the decision rests on
    reset: str | None  # why earlier evidence was dropped, if it was
    history: list[dict[str, Any]]
    blocked: dict[str, list[int | str]]  # counts and types undone
    run_id: str | None = None
    types: dict[str, str] = field(default_factory=dict)  # the managed groups' types this run uses
    recommended_types: dict[str, str] = field(default_factory=dict)  # and those the decision recommends

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        """The decision for the task log: a head line, then one line per group."""
        head = f"Right-sizing ({self.mode}, objective {self.objective}): {self.evidence} run(s) of evidence" + (
            f"; evidence reset: {self.reset}" if self.reset else ""
        )
        return [head, *(f"  {g.line()}" for g in self.groups)]


def next_run_lines(state: Mapping[str, Any]) -> list[str]:
    """A decision kept as plain JSON (XCom), as the task log and the Instance groups view say it: what the
    next run uses, then one line per group."""
    counts = _cluster(state.get("counts"), state.get("types"), state.get("written_types"))
    recommended = _cluster(state.get("recommended"), state.get("recommended_types"), state.get("written_types"))
    head = f"Right-sizing ({state.get('mode')}, objective {state.get('objective')}): the next run uses {counts}"
    if recommended != counts:
        head += f"; recommended: {recommended}"
    lines = [head + f" ({state.get('evidence')} run(s) of evidence)"]
    if state.get("reset"):
        lines.append(f"  evidence reset: {state['reset']}")
    lines.extend(f"  {group_decision_of(g).line()}" for g in state.get("groups") or [])
    return lines


def group_decision_of(kept: Mapping[str, Any]) -> GroupDecision:
    """A group's decision kept as plain JSON (XCom's ``groups`` of a decision), as the object that says it."""
    decision = GroupDecision(**{k: kept[k] for k in ("group", "action", "count", "next_count", "reason")})
    decision.figures = dict(kept.get("figures") or {})
    decision.type, decision.next_type = kept.get("type"), kept.get("next_type")
    return decision


def _cluster(counts: Any, types: Any, written: Any) -> str:
    """``group=count``, with `` x type`` for a group whose type is not the one written."""
    kinds, as_written = as_map(types), as_map(written)
    return ", ".join(
        f"{g}={n}" + (f" x {kinds[g]}" if g in kinds and kinds[g] != as_written.get(g) else "")
        for g, n in as_map(counts).items()
    )
