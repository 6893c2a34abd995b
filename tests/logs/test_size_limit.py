"""The size bound's cutting order, pinned: large generated summaries cut at many bounds give the same bytes.

The digests were taken from the bound as it was before its cutting order became a table
(issue 17); any change to what is cut, in which order, or what ``truncated`` says changes them.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

import pytest

from airflow_hetero.logs.series import group_series
from airflow_hetero.logs.size_limit import enforce_size_limit, json_size


def _line(rng: random.Random, longest: int) -> str:
    return " ".join(f"w{rng.randrange(10**6)}" for _ in range(rng.randrange(1, longest // 8 + 2)))[:longest]


def generated(
    seed: int,
    *,
    groups: int,
    hosts: int,
    tail: int,
    samples: int,
    points: int,
    problems: int,
    unmapped: int,
    long_lines: int = 600,
) -> dict[str, Any]:
    """A summary shaped like summarize_training_job's, every part that the bound cuts present and large."""
    rng = random.Random(seed)
    out: dict[str, Any] = {
        "training_job_name": f"job-{seed}",
        "status": "Failed",
        "secondary_status": "Failed",
        "failure_reason": "AlgorithmError: " + "r" * 700,
        "partial": False,
        "timeline": [
            {
                "status": s,
                "start": "2026-01-01T00:00:00.000Z",
                "end": "2026-01-01T00:01:00.000Z",
                "seconds": 60.0,
                "ongoing": False,
                "message": _line(rng, 200),
            }
            for s in ("Starting", "Downloading", "Training", "Uploading", "Failed")
        ],
        "billable_seconds": 600,
        "training_seconds": 590,
        "training_window": {"start": "2026-01-01T00:00:00.000Z", "end": "2026-01-01T00:10:00.000Z", "seconds": 600.0},
        "groups": {},
    }
    verdict_groups: dict[str, Any] = {}
    number = 0
    for g in range(groups):
        names = [f"algo-{number + i + 1}" for i in range(hosts)]
        number += hosts
        data = {
            h: {
                "CPUUtilization": [(60.0 * k, rng.uniform(0, 800), rng.uniform(0, 900)) for k in range(points)],
                "DiskUtilization": [(60.0 * k, rng.uniform(0, 100), None) for k in range(points)],
            }
            for h in names
        }
        out["groups"][f"group_{g}"] = {
            "instance_type": "ml.c5.18xlarge",
            "instance_count": hosts,
            "hosts": names,
            "mapped_by": {h: "toolkit" for h in names},
            "log_streams": [f"job-{seed}/{h}-1767225600" for h in names],
            "events": 1000 * hosts,
            "bytes": 50_000 * hosts,
            "first_event": "2026-01-01T00:00:01.000Z",
            "last_event": "2026-01-01T00:09:59.000Z",
            "errors": samples * 3,
            "warnings": 7,
            "error_samples": [
                {
                    "host": names[i % hosts],
                    "time": "2026-01-01T00:05:00.000Z",
                    "line": _line(rng, long_lines),
                    **({"exception": "RuntimeError: " + _line(rng, long_lines)} if i % 2 else {}),
                }
                for i in range(samples)
            ],
            "tail": {h: [_line(rng, long_lines if k % 5 == 0 else 120) for k in range(tail)] for h in names},
            "metrics": {"train:loss": {"last": 0.5, "best": 0.25, "goal": "min", "count": 10}},
            "utilization": {
                "cpu": {"avg": 50.0, "max": 90.0, "hosts": hosts, "datapoints": points},
                "memory": None,
                "gpu": None,
                "gpu_memory": None,
            },
            "instance_seconds": 600.0 * hosts,
            "series": group_series(names, data, (0.0, 60.0 * points), points=points) if points else None,
        }
        verdict_groups[f"group_{g}"] = {
            "resource": "cpu",
            "busy_percent": 50.0,
            "state": "busy",
            "instance_count": hosts,
            "cpus": 72,
            "gpus": 0,
        }
    unmapped_hosts = [f"algo-{number + i + 1}" for i in range(unmapped)]
    out["unmapped_hosts"] = unmapped_hosts
    out["unmapped"] = (
        {
            "hosts": list(unmapped_hosts),
            "log_streams": [f"job-{seed}/{h}-1" for h in unmapped_hosts],
            "events": 5,
            "bytes": 50,
            "first_event": None,
            "last_event": None,
            "errors": 1,
            "warnings": 0,
            "error_samples": [{"host": unmapped_hosts[0], "time": None, "line": _line(rng, long_lines)}],
            "tail": {h: [_line(rng, 400)] * 3 for h in unmapped_hosts},
            "metrics": {},
        }
        if unmapped
        else None
    )
    out["problems"] = [f"problem {i}: " + _line(rng, 150) for i in range(problems)]
    out["errors"] = sum(g["errors"] for g in out["groups"].values())
    out["warnings"] = 7 * groups
    out["truncated"] = {}
    out["verdict"] = {
        "kind": "not_saturated",
        "bottleneck": None,
        "message": _line(rng, 300),
        "suggestion": None,
        "groups": verdict_groups,
        "idle_groups": [],
        "over_provisioned_groups": [],
        "notes": [_line(rng, 100) for _ in range(3)],
        "thresholds": {"busy_percent": 85.0},
        "instance_seconds": 1.0,
        "waiting_instance_seconds": None,
        "waiting_share": None,
    }
    out["api_calls"] = {"DescribeTrainingJob": 1, "GetLogEvents": 3 * groups * hosts, "total": 1 + 3 * groups * hosts}
    return out


CASES: dict[str, dict[str, int]] = {
    "series-heavy": dict(groups=4, hosts=2, tail=3, samples=2, points=240, problems=2, unmapped=0),
    "tails-and-samples": dict(groups=3, hosts=4, tail=40, samples=30, points=30, problems=5, unmapped=3),
    "many-problems-unmapped": dict(groups=2, hosts=3, tail=10, samples=5, points=60, problems=60, unmapped=80),
    "wide": dict(groups=5, hosts=120, tail=4, samples=10, points=60, problems=8, unmapped=30),
}
BOUNDS = (2048, 3000, 4500, 6000, 9000, 13_000, 20_000, 30_000, 48 * 1024, 80_000, 150_000)


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, default=str).encode()).hexdigest()[:16]


def stages(out: dict[str, Any]) -> set[str]:
    """Which steps of the cutting order this output went through."""
    truncated = out.get("truncated") or {}
    found = {key for key in ("tail", "error_samples") if key in truncated}
    if "points_per_group" in (truncated.get("series") or {}):
        found.add("series halved")
    if truncated.get("series") == {"dropped": True}:
        found.add("series dropped")
    for item in truncated.get("other", ()):
        for stage in (
            "timeline messages",
            "problems (",
            "unmapped_hosts (",
            "verdict details",
            "per-host lists",
            "everything but",
        ):
            if item.startswith(stage) or stage in item:
                found.add(stage)
    return found


EXPECTED: dict[str, list[str]] = {
    "many-problems-unmapped": [
        "00438321ce2efb65",
        "9293b10fd244186c",
        "784ddf2ae0cb9663",
        "1d7fd2b0804e3f48",
        "34cbd74f5b5a57f1",
        "8bc5306265514524",
        "f60e80083ee35d16",
        "8fe206acad7e210b",
        "a823d80c5457ba85",
        "2d18a66c51866fde",
        "2f6155cb4273167b",
    ],
    "series-heavy": [
        "f4bbef53e9b4a2d4",
        "242958b3f8330556",
        "48a019308fc7b986",
        "441a0af8e871774e",
        "5597875c1c897990",
        "cc4cf37411901e44",
        "a3241faae671b8eb",
        "c3a5897af699b73d",
        "5d9a9be050b72cf9",
        "5d9a9be050b72cf9",
        "5d9a9be050b72cf9",
    ],
    "tails-and-samples": [
        "1d548f10c50c2353",
        "06a25d7b371e06c8",
        "b4f5d11bdfb1cbdb",
        "825c80e1d54bd3f6",
        "c3750b101e0af41a",
        "2831a47a8c390be7",
        "e80b8002d5164c3b",
        "884da2987edfab9e",
        "20fd98ea5b3815dc",
        "0c44ba334dc77bff",
        "21a197030761b511",
    ],
    "wide": [
        "1884e01788fb757b",
        "c27023aa75bb23e8",
        "a96cbacefbcb5585",
        "f58b07518031670b",
        "b6fade31e48850a2",
        "58af862bb816533f",
        "16623e5f30a98678",
        "0928365a03d64fa4",
        "d3ce40efc7dfac3b",
        "8bf789e08775e997",
        "2de3b21af21ee755",
    ],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_cutting_order_gives_the_same_bytes(case: str) -> None:
    summary = generated(len(case), **CASES[case])
    before = digest(summary)
    outs = [enforce_size_limit(summary, bound) for bound in BOUNDS]
    assert digest(summary) == before  # the input is never changed
    for bound, out in zip(BOUNDS, outs, strict=True):
        assert json_size(out) <= bound
    assert [digest(out) for out in outs] == EXPECTED[case]


def test_the_cases_reach_every_step() -> None:
    reached = set().union(
        *(stages(enforce_size_limit(generated(len(case), **CASES[case]), bound)) for case in CASES for bound in BOUNDS)
    )
    assert reached == {
        "series halved",
        "tail",
        "error_samples",
        "timeline messages",
        "problems (",
        "unmapped_hosts (",
        "series dropped",
        "verdict details",
        "per-host lists",
        "everything but",
    }


def test_the_docs_table_is_the_cutting_order() -> None:
    """docs/log-summary.md lists CUTTING_ORDER step by step, each with the note it records."""
    import re
    from pathlib import Path

    from airflow_hetero.logs.size_limit import CUTTING_ORDER

    page = (Path(__file__).resolve().parents[2] / "docs" / "log-summary.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d+) \| (.+?) \| (.+?) \|$", page[page.index("## Size bound") :], re.MULTILINE)
    assert [int(n) for n, _, _ in rows] == list(range(1, len(CUTTING_ORDER) + 1))
    for (_, _, says), cut in zip(rows, CUTTING_ORDER, strict=True):
        first = re.search(r"`([^`]+)`", says)
        assert first is not None and cut.note.startswith(first.group(1).split(":")[0]), (says, cut.note)
