"""Prices from the Price List Query API kept on disk, one file per region and endpoint, with an expiry.

The folder is the package's cache folder (:func:`airflow_hetero.cache_dir`:
``$AIRFLOW_HETERO_CACHE_DIR``, else ``$XDG_CACHE_HOME/airflow-hetero`` or ``~/.cache/airflow-hetero``;
``off`` turns caching off) under ``prices/``. A file is ``{"format", "endpoint", "region", "prices":
{type: {"per_hour", "description", "fetched"}}}``; an entry older than ``max_age`` seconds, a file
of another format, or one that cannot be read is a miss, never an error. Only prices found are
kept; overrides and unknown prices never are. Writes are atomic.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import time
from pathlib import Path
from typing import Any

from airflow_hetero import cache_dir
from airflow_hetero.pricing.price_list import FROM_CACHE, PRICE_LIST_CURRENCY, Price, number_or_none

#: A week: on-demand prices change rarely, and a change shows after this long at the latest.
DEFAULT_MAX_AGE = 7 * 24 * 3600
_FORMAT = "airflow-hetero prices 1"


class PriceCache:
    """The prices of one region as answered by one endpoint (``endpoint`` None: AWS's own)."""

    def __init__(
        self, region: str, endpoint: str | None = None, *, folder: Path | None = None, max_age: float = DEFAULT_MAX_AGE
    ) -> None:
        if not (max_age >= 0 and math.isfinite(max_age)):
            raise ValueError(f"max_age must be a finite number of seconds >= 0, got {max_age}")
        base = folder if folder is not None else cache_dir()
        digest = hashlib.blake2b((endpoint or "aws").encode(), digest_size=6).hexdigest()
        self.path = None if base is None else base / "prices" / f"{region}-{digest}.json"
        self.region, self.endpoint, self.max_age = region, endpoint, max_age

    def _read(self) -> dict[str, Any]:
        if self.path is None:
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        ok = isinstance(data, dict) and data.get("format") == _FORMAT and isinstance(data.get("prices"), dict)
        return data["prices"] if ok and data.get("region") == self.region else {}

    def get(self, instance_type: str, now: float | None = None) -> Price | None:
        """The cached price, or None when absent, expired or unreadable."""
        entry = self._read().get(instance_type)
        if not isinstance(entry, dict):
            return None
        per_hour, fetched = number_or_none(entry.get("per_hour")), number_or_none(entry.get("fetched"))
        if per_hour is None or fetched is None:
            return None
        if (now if now is not None else time.time()) - fetched > self.max_age:
            return None
        description = entry.get("description") if isinstance(entry.get("description"), str) else None
        return Price(instance_type, per_hour, PRICE_LIST_CURRENCY, FROM_CACHE, description)

    def put(self, price: Price, now: float | None = None) -> None:
        """Remember a price the API gave; a folder that cannot be written only means no cache."""
        if self.path is None or price.per_hour is None:
            return
        prices = self._read()
        prices[price.instance_type] = {
            "per_hour": price.per_hour,
            "description": price.description,
            "fetched": now if now is not None else time.time(),
        }
        data = {"format": _FORMAT, "endpoint": self.endpoint, "region": self.region, "prices": prices}
        partial = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
            os.replace(partial, self.path)
        except OSError:
            with contextlib.suppress(OSError):
                partial.unlink()
