"""``RunOptions``: the endpoint's timing and limits, each default stated here once.

``LocalEndpoint(run=RunOptions(...))`` takes them and ``local serve`` reads its flags' defaults from
them; importing this module loads nothing of the endpoint (only :mod:`.spot`, stdlib only).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from airflow_hetero.local.training.spot import SpotOptions


@dataclass(frozen=True)
class RunOptions:
    """Timing knobs and limits of the endpoint (tests shorten them)."""

    stop_grace: float = 5.0
    """Seconds between SIGTERM and SIGKILL when hosts are terminated."""
    metrics_interval: float = 5.0
    """Seconds between two samples of each host's CPU and memory metrics."""
    log_flush_interval: float = 1.0
    """Seconds between two batches of host output sent to CloudWatch Logs."""
    poll_interval: float = 0.1
    max_request_bytes: int = 64 * 1024 * 1024
    """Largest request body the endpoint reads (413 beyond); its request guard applies it."""
    max_hosts: int = 32
    """Hosts running at once over all jobs; a create beyond it answers ResourceLimitExceeded."""
    max_source_bytes: int = 1 << 30
    """Bytes a source tarball may extract to (per host when a channel delivers it)."""
    max_channel_bytes: int = 8 << 30
    """Bytes one channel may download to one host."""
    spot: SpotOptions = field(default_factory=SpotOptions)
    """When spot jobs are interrupted, how long they wait, the stand-in saving, the checkpoint copy interval."""
