"""Synchronous wait with print_log: log calls per stream per poll, and memory against the log rate.

A CloudWatch Logs stand-in (the service's paging rules: at most 10,000 events per page, the same
token back at a stream's end) grows every host's stream between polls; ``LogTailer`` follows the
job as the operator does. The baseline, in the same run, is the previous reader: every stream read
until its token stops moving, all new events of all streams held and sorted before printing.
Printed per log rate: GetLogEvents calls per stream per poll (the floor is 1) and peak traced
memory, with ratios against the baseline. The tailer's memory stops growing at one page
(10,000 events), whatever the rate; the baseline's grows with interval x log rate x hosts.

    python -m benchmarks.print_log [--hosts 8] [--polls 20]
"""

from __future__ import annotations

import argparse
import sys
import tracemalloc
from typing import Any

from airflow_hetero.logs.tail import LogsGroupResolver, LogTailer

LINE = "step 00042 loss=0.1234 throughput=5321.9 samples/s " + "x" * 60


class GrowingLogs:
    """Streams that gain ``per_poll`` events per host before each poll, paged like CloudWatch Logs."""

    def __init__(self, job: str, hosts: int) -> None:
        self.job = job
        self.lengths = {f"{job}/algo-{h + 1}-1700000000": 0 for h in range(hosts)}

    def grow(self, per_poll: int) -> None:
        for name in self.lengths:
            self.lengths[name] += per_poll

    def describe_log_streams(self, **_: Any) -> dict[str, Any]:
        return {"logStreams": [{"logStreamName": name} for name in self.lengths]}

    def get_log_events(self, *, logStreamName: str, nextToken: str | None = None, **_: Any) -> dict[str, Any]:
        start = int(nextToken.split("/")[1]) if nextToken else 0
        end = min(self.lengths[logStreamName], start + 10_000)
        if end == start:
            return {"events": [], "nextForwardToken": nextToken or "f/0"}
        events = [{"timestamp": i, "message": f"{LINE} {i}"} for i in range(start, end)]
        return {"events": events, "nextForwardToken": f"f/{end}"}


class HoldAndSortReader:
    """The previous reader, kept as the baseline: read every stream to its end, sort, then print."""

    def __init__(self, client: GrowingLogs, emit: Any) -> None:
        self.client = client
        self.emit = emit
        self.tokens: dict[str, str | None] = dict.fromkeys(client.lengths)
        self.get_calls = 0

    def poll(self) -> None:
        events: list[tuple[int, int, str]] = []
        for order, name in enumerate(self.tokens):
            while True:
                token = self.tokens[name]
                page = self.client.get_log_events(logStreamName=name, nextToken=token)
                self.get_calls += 1
                events.extend((e["timestamp"], order, e["message"]) for e in page["events"])
                if page["nextForwardToken"] == token:
                    break
                self.tokens[name] = page["nextForwardToken"]
        events.sort(key=lambda e: (e[0], e[1]))
        for _, _, message in events:
            self.emit(message)


def follow(hosts: int, polls: int, per_poll: int, *, baseline: bool) -> dict[str, float]:
    """Follow a job for ``polls`` polls; calls per stream per poll and peak traced bytes."""
    client = GrowingLogs("bench-job", hosts)
    emitted = 0

    def emit(line: str) -> None:
        nonlocal emitted
        emitted += 1

    reader: Any = (
        HoldAndSortReader(client, emit)
        if baseline
        else LogTailer(client, "bench-job", emit=emit, resolver=LogsGroupResolver(), expected_hosts=hosts)
    )
    tracemalloc.start()
    for _ in range(polls):
        client.grow(per_poll)
        reader.poll()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    if emitted != hosts * polls * per_poll:
        raise RuntimeError(f"emitted {emitted} lines, expected {hosts * polls * per_poll}")
    return {"calls_per_stream_poll": reader.get_calls / (hosts * polls), "peak_bytes": float(peak)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--polls", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"print_log: {args.hosts} hosts, {args.polls} polls; baseline = the previous hold-and-sort reader")
    head = f"{'lines/host/poll':>16} {'calls/stream/poll':>18} {'baseline':>9} {'peak MB':>8} {'baseline':>9} {'x':>6}"
    print(head)
    for per_poll in (100, 2_000, 20_000):
        new = follow(args.hosts, args.polls, per_poll, baseline=False)
        old = follow(args.hosts, args.polls, per_poll, baseline=True)
        print(
            f"{per_poll:16,} {new['calls_per_stream_poll']:18.2f} {old['calls_per_stream_poll']:9.2f}"
            f" {new['peak_bytes'] / 1e6:8.2f} {old['peak_bytes'] / 1e6:9.2f}"
            f" {new['peak_bytes'] / old['peak_bytes']:6.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
