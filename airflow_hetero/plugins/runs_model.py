"""The runs of a training task as the Runs view and ``airflow-hetero runs`` show them: one row per run, read from
what the training task and its summary task pushed to XCom (pure: no Airflow, no web framework).

Input is each run's XComs (:class:`RunXComs`: ``(task_id, key) -> value``, the keys of
:mod:`airflow_hetero.xcom_keys` only); :func:`pair_tasks` tells the training task from its summary task by the
job name both name, so the command and the view may be given either. A run's :class:`RunRow` says what it cost
per instance group (and what waited), how long it ran, each group's count and type, the right-sizing decision it
ran with, its markers (a capacity fallback and the cluster that ran, a budget stop, spot interruptions and the
saving, the queue's wait and attempts, a failure) and the bottleneck verdict; what a run lacks (no summary, a
summary cut to fit XCom's bound) it says in ``missing`` and shows the rest. Summaries are read through
:mod:`airflow_hetero.logs.accessors`, so an older or cut one never breaks a row.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

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

#: The keys a training or summary task of this package pushes besides its result: a task with one is one of them.
OWN_KEYS = (
    JOB_NAME_XCOM_KEY,
    CAPACITY_ATTEMPTS_XCOM_KEY,
    SERVICE_JOB_XCOM_KEY,
    RIGHTSIZING_XCOM_KEY,
    VERDICT_XCOM_KEY,
    COST_XCOM_KEY,
    BUDGET_STOP_XCOM_KEY,
)
#: Every key the runs are read from (what the one query of the view asks for).
READ_KEYS = (RESULT_XCOM_KEY, *OWN_KEYS)
#: A job status that ends a run without its result.
ENDED_BADLY = frozenset({"Failed", "Stopped"})
#: A right-sizing action that moves a group.
MOVES = frozenset({"changed", "undone"})


#: Runs on a page by default, and at most (the page is bounded).
DEFAULT_LIMIT, MAX_LIMIT = 30, 100


def checked_limit(value: int) -> int:
    """Runs per page: 1 to :data:`MAX_LIMIT` (ValueError otherwise: the page is bounded)."""
    if not 1 <= value <= MAX_LIMIT:
        raise ValueError(f"runs per page must be 1 to {MAX_LIMIT}, got {value}")
    return value


def checked_page(value: int) -> int:
    """A page number: 1 (the newest runs) or more."""
    if value < 1:
        raise ValueError(f"the page is 1 (the newest runs) or more, got {value}")
    return value


@dataclass(frozen=True)
class RunXComs:
    """One DAG run and what its tasks pushed under :data:`READ_KEYS`."""

    run_id: str
    date: str | None  # ISO 8601: the run's logical date, else when it was due to run
    state: str | None  # the DAG run's state
    values: Mapping[tuple[str, str], Any]  # (task_id, key) -> value


def runs_from_rows(
    runs: Iterable[tuple[str, str | None, str | None]], rows: Iterable[tuple[str, str, str, Any]]
) -> list[RunXComs]:
    """Each run of ``runs`` (``(run_id, date, state)``, in their order) with its XComs from ``rows``
    (``(run_id, task_id, key, value)``); a run with none has none."""
    values: dict[str, dict[tuple[str, str], Any]] = {}
    for run_id, task_id, key, value in rows:
        values.setdefault(run_id, {})[(task_id, key)] = value
    return [RunXComs(run_id, date, state, values.get(run_id, {})) for run_id, date, state in runs]


def runs_of_entries(entries: Iterable[Any], dag_id: str, *, map_index: int = -1) -> list[RunXComs]:
    """The runs of ``dag_id`` in an export of XComs, newest first: each entry a mapping with ``run_id``,
    ``task_id``, ``key`` and ``value`` (and optionally ``dag_id``, ``map_index``, the run's ``logical_date``,
    ``run_after`` or ``timestamp``, and its ``state``), as Airflow's REST API lists XCom entries with their value.
    Entries of other DAGs, other map indexes or other keys are left out; a run is dated by its latest date."""
    dates: dict[str, str | None] = {}
    states: dict[str, str | None] = {}
    rows = []
    for entry in entries:
        if not isinstance(entry, Mapping) or entry.get("dag_id", dag_id) != dag_id:
            continue
        if entry.get("map_index", -1) != map_index or entry.get("key") not in READ_KEYS:
            continue
        run_id, task_id = str(entry.get("run_id")), str(entry.get("task_id"))
        rows.append((run_id, task_id, str(entry["key"]), entry.get("value")))
        date = next((str(entry[k]) for k in ("logical_date", "run_after", "timestamp") if entry.get(k)), None)
        dates[run_id] = max(filter(None, (dates.get(run_id), date)), default=None)
        states[run_id] = entry.get("state") or states.get(run_id)
    order = sorted(dates, key=lambda r: (dates[r] or "", r), reverse=True)
    return runs_from_rows([(r, dates[r], states[r]) for r in order], rows)


@dataclass(frozen=True)
class TaskPair:
    """The training task and the summary task that summarises it (None: not found in these runs)."""

    training: str | None
    summary: str | None


def summary_of(value: Any) -> Mapping[str, Any] | None:
    """A summary task's result: a mapping naming its job and its groups."""
    if isinstance(value, Mapping) and "training_job_name" in value and isinstance(value.get("groups"), Mapping):
        return value
    return None


def _job_names(runs: Sequence[RunXComs], task: str) -> dict[str, str]:
    """run id -> the job a training task ran (its pushed name, else its result's)."""
    names = {}
    for run in runs:
        result = run.values.get((task, RESULT_XCOM_KEY))
        name = run.values.get((task, JOB_NAME_XCOM_KEY))
        name = name or (result.get("training_job_name") if isinstance(result, Mapping) else None)
        if isinstance(name, str) and name:
            names[run.run_id] = name
    return names


def _summarised(runs: Sequence[RunXComs], task: str) -> dict[str, str]:
    """run id -> the job a summary task summarised."""
    out = {}
    for run in runs:
        summary = summary_of(run.values.get((task, RESULT_XCOM_KEY)))
        if summary is not None and isinstance(summary.get("training_job_name"), str):
            out[run.run_id] = str(summary["training_job_name"])
    return out


def pair_tasks(runs: Sequence[RunXComs], task_id: str) -> TaskPair:
    """The training task and its summary task, ``task_id`` being either (a task that is no summary task is taken
    for the training task, even in runs it pushed nothing): the other is the task whose job names match in the
    most runs (a DAG may hold several pairs), else the one that pushed beside it in the most runs (a summary whose
    result was not read names no job)."""
    tasks = {task for run in runs for task, _ in run.values}
    trainers = {t for run in runs for t, key in run.values if key == JOB_NAME_XCOM_KEY}
    summaries = {t for t in tasks if _summarised(runs, t)} | {
        t for run in runs for t, key in run.values if key in (VERDICT_XCOM_KEY, COST_XCOM_KEY)
    }

    def beside(other: str) -> int:
        return sum(1 for run in runs if {t for t, _ in run.values} >= {task_id, other})

    def best(candidates: Iterable[str], agree: Any) -> str | None:
        score = {c: (agree(c), beside(c)) for c in sorted(candidates) if c != task_id}
        found = sorted((c for c, n in score.items() if n > (0, 0)), key=lambda c: score[c], reverse=True)
        return found[0] if found else None

    if task_id in trainers or task_id not in summaries:
        ran = _job_names(runs, task_id)
        partner = best(summaries, lambda s: sum(ran.get(r) == j for r, j in _summarised(runs, s).items()))
        return TaskPair(task_id, partner)
    summarised = _summarised(runs, task_id)
    partner = best(trainers, lambda t: sum(summarised.get(r) == j for r, j in _job_names(runs, t).items()))
    return TaskPair(partner, task_id)


@dataclass
class GroupRow:
    """One instance group in one run: its cluster and what it cost (None: not known)."""

    name: str
    type: str | None
    count: int | None
    cost: float | None = None
    waiting_cost: float | None = None
    instance_seconds: float | None = None
    price_per_hour: float | None = None


@dataclass
class Marker:
    """Something that happened to a run, as the chart marks it and the table says it."""

    kind: str  # one of MARKER_KINDS
    text: str


#: Marker kinds, in the order a run's markers are listed, each with the letter the chart and the table mark a
#: run with and what the legend calls it.
MARKERS: dict[str, tuple[str, str]] = {
    "failed": ("F", "failed"),
    "budget": ("B", "budget stop"),
    "limit": ("L", "stopped at a SageMaker limit"),
    "capacity": ("C", "capacity fallback"),
    "spot": ("S", "spot (interruptions, saving)"),
    "queue": ("Q", "queued (wait, attempts)"),
}
MARKER_KINDS = tuple(MARKERS)


@dataclass
class DecisionRow:
    """The right-sizing decision a run was made with, in one line."""

    mode: str  # apply or recommend
    line: str
    action: str  # changed (applied or recommended), undone, held (refused by a bound or the budget), kept

    @property
    def moved(self) -> bool:
        """A group's count or type changed (apply), or a change was recommended."""
        return self.action in MOVES

    @property
    def undo(self) -> bool:
        """The change undoes an earlier one."""
        return self.action == "undone"


@dataclass
class RunRow:
    """One run of the training task as the view draws it and the command prints it."""

    run_id: str
    date: str | None
    state: str | None
    job: str | None = None
    status: str | None = None
    failure_reason: str | None = None
    seconds: float | None = None  # the run's length: the job's training time
    currency: str | None = None
    cost: float | None = None
    waiting_cost: float | None = None
    groups: list[GroupRow] = field(default_factory=list)
    verdict: str | None = None
    verdict_kind: str | None = None  # bottleneck, balanced, not_saturated, no_data
    bottleneck: str | None = None
    decision: DecisionRow | None = None
    markers: list[Marker] = field(default_factory=list)
    spot_saving: float | None = None
    fallback: bool = False  # ran after a capacity fallback (its cluster is not the one planned)
    queued_seconds: float | None = None  # queue mode: the wait before the first attempt started
    queue_attempts: int | None = None
    missing: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON (the command's ``--json``)."""
        return asdict(self)

    def has(self, kind: str) -> bool:
        """Whether the run carries a marker of ``kind``."""
        return any(m.kind == kind for m in self.markers)


def group_names(rows: Sequence[RunRow]) -> list[str]:
    """Every group of ``rows``, in the order they first appear."""
    names: list[str] = []
    for row in rows:
        names.extend(g.name for g in row.groups if g.name not in names)
    return names


def currency_of(rows: Sequence[RunRow]) -> str:
    """The currency the runs' costs are in (the first run that says; ``""`` when none has a cost)."""
    return next((row.currency for row in rows if row.currency), "")
