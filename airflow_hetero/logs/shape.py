"""The shape of a job's log summary, stated once: what every module that builds or reads it may rely on.

The summary is the XCom ``return_value`` of
:class:`~airflow_hetero.operators.log_summary.HeteroLogSummaryOperator` and of
:func:`~airflow_hetero.logs.summarize.summarize_training_job`. XCom stores plain JSON, so these are
``TypedDict`` s: plain dicts at run time, checked keys and value types for mypy. Keys are listed in
the order the summary holds them (its JSON is written in that order).

* :class:`LogSummary`: the summary as built (:func:`airflow_hetero.logs.per_group.build_summary`) and
  as the size bound leaves it after cutting (:mod:`airflow_hetero.logs.size_limit`); its
  ``groups`` are :class:`GroupSummary`, ``verdict`` a :class:`Verdict`
  (:mod:`airflow_hetero.logs.verdict`), ``cost`` a :class:`Cost` (or their headlines, once cut),
  ``truncated`` a :class:`Truncated`.
* :class:`SummarySkeleton`: what is left when even the cut summary is too big (the job's status
  and counts). :data:`BoundedSummary` is either: what the function returns and XCom holds.

A summary read back from XCom is only JSON: readers go through
:mod:`airflow_hetero.logs.accessors`, which checks a part before it is typed as one of these.

Pure: no imports from the package.
"""

from __future__ import annotations

from typing import Literal, NotRequired, Required, TypedDict, final

#: A key of a group's ``utilization`` (:class:`Utilization`).
UtilizationKey = Literal["cpu", "memory", "gpu", "gpu_memory"]
#: A metric key of a group's ``series`` (:class:`Series`): the utilisation's and ``disk``.
SeriesKey = Literal["cpu", "memory", "gpu", "gpu_memory", "disk"]

#: CloudWatch metric name -> key in a group's ``utilization`` (:class:`Utilization`).
UTILIZATION_METRICS: dict[str, UtilizationKey] = {
    "CPUUtilization": "cpu",
    "MemoryUtilization": "memory",
    "GPUUtilization": "gpu",
    "GPUMemoryUtilization": "gpu_memory",
}

#: Datapoints of one host and metric as read from CloudWatch: (epoch seconds, average, maximum).
Datapoint = tuple[float, float | None, float | None]


class TimelineStep(TypedDict):
    """One secondary status of the job (``SecondaryStatusTransitions``); ISO 8601 UTC times."""

    status: str | None
    start: str | None
    end: str | None
    seconds: float | None
    ongoing: bool  # the step the job is in now (a running job's last step)
    message: str | None  # None once the size bound cut it


class TrainingWindow(TypedDict):
    """TrainingStartTime to TrainingEndTime (or to now while the job runs)."""

    start: str | None
    end: str | None
    seconds: float


class JobOverview(TypedDict):
    """The job-level part, from DescribeTrainingJob; without an answer only ``status`` (None) and ``partial``."""

    status: str | None
    secondary_status: NotRequired[str | None]
    failure_reason: NotRequired[str | None]
    partial: bool  # the job is still running: the summary covers what has been logged so far
    timeline: NotRequired[list[TimelineStep]]
    billable_seconds: NotRequired[int | None]
    training_seconds: NotRequired[int | None]
    training_window: NotRequired[TrainingWindow | None]


class ErrorSampleEntry(TypedDict):
    """One of the first error lines of a group, with the host and time it came from."""

    host: str
    time: str | None
    line: str
    exception: NotRequired[str]  # a traceback's closing ``Name: message`` line


class MetricSummary(TypedDict):
    """One MetricDefinition's values in a group: ``best`` is the min or max as ``goal`` says."""

    last: float
    best: float
    goal: str  # "min" or "max"
    count: int


class UtilizationStat(TypedDict):
    """One metric over a group's hosts and the training window."""

    avg: float | None  # mean of the per-minute averages
    max: float | None  # largest per-minute maximum
    hosts: int  # hosts with datapoints
    datapoints: int
    unit: NotRequired[str]  # e.g. "% of all vCPUs" (:func:`airflow_hetero.logs.capacity.per_device_utilization`)


class Utilization(TypedDict):
    """Percent per device (CPU and GPU: SageMaker's sums divided by the group's ``devices``, each
    stat's ``unit`` says so); None: no datapoints."""

    cpu: UtilizationStat | None
    memory: UtilizationStat | None
    gpu: UtilizationStat | None
    gpu_memory: UtilizationStat | None


class SeriesLine(TypedDict):
    """Per bucket: the mean of the hosts' averages and the largest maximum (None: no datapoint)."""

    avg: list[float | int | None]
    max: list[float | int | None]


class Series(TypedDict):
    """A group's utilisation over the training window in ``points`` buckets of ``step_seconds``
    (:mod:`airflow_hetero.logs.series`); metrics without datapoints are left out."""

    start: str | None
    start_epoch: float
    step_seconds: int
    points: int
    cpu: NotRequired[SeriesLine]
    memory: NotRequired[SeriesLine]
    gpu: NotRequired[SeriesLine]
    gpu_memory: NotRequired[SeriesLine]
    disk: NotRequired[SeriesLine]


class LogPart(TypedDict):
    """What the logs of a set of hosts say: a group's, or the unmapped hosts'."""

    log_streams: list[str]
    events: int
    bytes: int
    first_event: str | None
    last_event: str | None
    errors: int
    warnings: int
    error_samples: list[ErrorSampleEntry]
    tail: dict[str, list[str]]  # host -> its last lines
    metrics: dict[str, MetricSummary]


class HostListTotals(TypedDict, total=False):
    """Set by the size bound when it cuts a per-host list: the list's length before the cut."""

    hosts_total: int
    log_streams_total: int
    mapped_by_total: int
    tail_total: int


class Devices(TypedDict):
    """vCPUs and GPUs per instance the utilisation was divided by (None: not known, figures summed)."""

    cpus: int | None
    gpus: int | None


class GroupSummary(LogPart, HostListTotals):
    """One instance group. Key order: ``instance_type``, ``instance_count``, ``devices``, ``hosts``,
    ``mapped_by``, the :class:`LogPart` keys, ``utilization``, ``instance_seconds``,
    ``spot_saved_instance_seconds``, ``series``."""

    instance_type: str | None
    instance_count: int
    devices: NotRequired[Devices]
    hosts: list[str]
    mapped_by: dict[str, str]  # host -> the evidence that put it here (logs.mapping.SOURCES)
    utilization: Utilization | None  # None: metrics were not read
    instance_seconds: float | None
    #: managed spot only: count x (TrainingTimeInSeconds - BillableTimeInSeconds), the instance time not billed
    spot_saved_instance_seconds: NotRequired[float]
    series: NotRequired[Series | None]  # summarize_training_job's; None: not read or none published


class UnmappedSection(LogPart, HostListTotals):
    """The hosts that no evidence maps to a group (``hosts`` first, then the :class:`LogPart` keys)."""

    hosts: list[str]


class GroupVerdict(TypedDict, total=False):
    """One group as the verdict judged it; keys with no value are left out."""

    resource: str  # "gpu" or "cpu": what the group is judged on
    busy_percent: float  # per device
    peak_percent: float
    state: Required[str]  # saturated, busy, waiting, idle, no_data
    instance_count: int
    cpus: int
    gpus: int
    instance_seconds: float
    waiting_share: float
    waiting_instance_seconds: float
    spot_saved_instance_seconds: float  # managed spot: the summary group's
    over_provisioned: bool  # only when True
    suggested_count: int
    effect: SuggestionEffect  # of suggested_count, when the summary was given prices
    memory_percent: float
    disk_percent: float


class SuggestionEffect(TypedDict, total=False):
    """What following a suggestion would change, in money and time (:mod:`airflow_hetero.logs.cost`).

    ``per_hour`` and ``per_run`` are changes (negative: saved); None with ``reason`` when a price is
    unknown. ``assumption`` states the model the figures rest on."""

    instance_count: Required[int]  # now
    suggested_count: Required[int]
    currency: Required[str]
    per_hour: Required[float | None]
    per_run: Required[float | None]
    run_seconds: float  # the run's billable length now
    run_seconds_after: float  # under the verdict's model
    assumption: Required[str]
    reason: str


class Suggestion(TypedDict):
    group: str
    instance_count: int
    effect: NotRequired[SuggestionEffect]  # when the summary was given prices


class Verdict(TypedDict):
    """Which group holds the job back (:func:`airflow_hetero.logs.verdict.judge`)."""

    kind: str  # bottleneck, balanced, not_saturated, no_data
    bottleneck: str | None
    message: str
    suggestion: Suggestion | None
    groups: dict[str, GroupVerdict]
    idle_groups: list[str]
    over_provisioned_groups: list[str]
    notes: list[str]
    thresholds: dict[str, float]
    instance_seconds: float | None
    waiting_instance_seconds: float | None
    waiting_share: float | None


@final  # so that ``"groups" in verdict`` tells a headline from a whole verdict
class VerdictHeadline(TypedDict, total=False):
    """A verdict the size bound cut to its headline (keys with no value left out)."""

    kind: str
    bottleneck: str
    message: str
    suggestion: Suggestion
    waiting_share: float


class GroupCost(TypedDict):
    """One group's cost: instance-seconds x price per hour / 3600; None with ``reason`` when unknown."""

    instance_type: str | None
    instance_count: int
    instance_seconds: float | None
    price_per_hour: float | None
    cost: float | None
    waiting_instance_seconds: float | None  # the verdict's
    waiting_cost: float | None
    reason: NotRequired[str]
    spot_saving: NotRequired[float]  # managed spot: spot_saved_instance_seconds x price per hour / 3600


class PriceEntry(TypedDict):
    """One instance type's price as the summary used it (:class:`airflow_hetero.pricing.price_list.Price`)."""

    per_hour: float | None
    currency: str
    source: NotRequired[str]  # override, pricing_api, cache
    description: NotRequired[str]  # the Price List's own words (the offline endpoint's say "stand-in")


class SpotRatio(TypedDict):
    """A managed spot job's BillableTimeInSeconds / TrainingTimeInSeconds (None while unknown)."""

    billable_seconds: int | None
    training_seconds: int | None
    ratio: float | None


class Cost(TypedDict):
    """What the job cost per group and in all, and what its waiting cost (:mod:`airflow_hetero.logs.cost`)."""

    currency: str
    total: float | None  # None when a group's cost is unknown
    waiting: float | None  # the cost of the instance time spent waiting
    groups: dict[str, GroupCost]
    prices: dict[str, PriceEntry]
    estimate: bool  # a spot job or a running one: the figures are estimates
    spot: SpotRatio | None
    notes: list[str]
    spot_saving: NotRequired[float]  # managed spot: every group's spot_saving (left out when one is unknown)


@final  # so that ``"groups" in cost`` tells a whole cost from a headline
class CostHeadline(TypedDict, total=False):
    """A cost the size bound cut to its total (keys it did not have left out)."""

    currency: Required[str]
    total: float | None
    waiting: float | None


class TailCut(TypedDict):
    lines_per_host: int
    line_chars: int
    lines_dropped: int


class SamplesCut(TypedDict):
    per_group: int
    line_chars: int
    dropped: int


class SeriesCut(TypedDict, total=False):
    points_per_group: int  # halved to this many points
    dropped: bool  # dropped altogether


class Truncated(TypedDict, total=False):
    """What the size bound cut; ``{}`` when nothing was."""

    bytes_before: int
    max_xcom_bytes: int
    series: SeriesCut
    bytes_after: int
    tail: TailCut
    error_samples: SamplesCut
    other: list[str]  # the other cuts, in the order they were made


class AttemptGroup(TypedDict):
    """One instance group of a capacity attempt's cluster."""

    name: str
    type: str
    count: int


class CapacityAttempt(TypedDict):
    """A cluster that failed for lack of capacity before the job that ran (the training operator's
    ``capacity_attempts``; docs/capacity.md): its job (None: the create was refused) and the reason."""

    job_name: str | None
    instance_groups: list[AttemptGroup]
    reason: str


class QueueAttempt(TypedDict):
    """One attempt of a queued job's service job (docs/queue.md): its training job and what it billed."""

    training_job: str
    status: str | None
    billable_seconds: float | None
    cost: float | None  # None: see ``reason``
    reason: NotRequired[str]


class QueueAttempts(TypedDict):
    """The service job a queued job ran in and every attempt's cost (:mod:`airflow_hetero.logs.queue_attempts`)."""

    service_job: str
    job_id: str
    job_queue: str | None
    currency: str
    attempts: list[QueueAttempt]  # oldest first, the summarised job last
    earlier_cost: float | None  # the attempts before the summarised job (None: one is unknown)
    total: float | None  # every attempt's (None: one is unknown)


class RightSizingView(TypedDict):
    """The next run's right-sizing decision as the summary shows it (docs/rightsizing.md)."""

    mode: str
    next: dict[str, int]  # the counts the next run would use
    next_types: dict[str, str]  # the managed groups' types the next run would use ({}: types not followed)
    recommended_types: dict[str, str]  # and the types the decision recommends
    lines: list[str]  # the decision, one line per group


class LogSummary(JobOverview):
    """The whole summary. Key order: ``training_job_name``, the :class:`JobOverview` keys, then the
    ones below; ``verdict`` and ``api_calls`` come from summarize_training_job (build_summary adds
    them when given what they need), the ``*_total`` keys from the size bound."""

    training_job_name: str
    groups: dict[str, GroupSummary]
    unmapped_hosts: list[str]
    unmapped: UnmappedSection | None
    problems: list[str]
    errors: int
    warnings: int
    truncated: Truncated
    verdict: NotRequired[Verdict | VerdictHeadline]
    cost: NotRequired[Cost | CostHeadline]  # when the summary was given prices (or overrides)
    api_calls: NotRequired[dict[str, int]]  # calls by action, plus "total"
    capacity_attempts: NotRequired[list[CapacityAttempt]]  # only when the job ran after a capacity fallback
    queue_attempts: NotRequired[QueueAttempts]  # only when the job ran in a queue (a service job's attempt)
    rightsizing: NotRequired[RightSizingView]  # the summary operator's, when its training task right-sizes
    problems_total: NotRequired[int]
    unmapped_hosts_total: NotRequired[int]


class SkeletonGroup(TypedDict):
    instance_count: int | None
    errors: int | None


@final  # so that ``"unmapped" in summary`` tells a whole summary from a skeleton
class SummarySkeleton(TypedDict):
    """The job's status and counts only: what the size bound leaves when even the cut summary is too big."""

    training_job_name: str | None
    status: str | None
    secondary_status: str | None
    partial: bool | None
    errors: int | None
    warnings: int | None
    failure_reason: str | None
    groups: dict[str, SkeletonGroup]  # at most five, names cut to 64 characters
    truncated: Truncated


#: What summarize_training_job returns and XCom holds.
BoundedSummary = LogSummary | SummarySkeleton
