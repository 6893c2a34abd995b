"""Host -> group from what SDK v3's drivers print, pinned by their real output (tests/data/sdk3-drivers/,
made by tests/support/make_sdk3_fixture.py: v3's sm_drivers run on the offline endpoint, at
SM_LOG_LEVEL 20 and 30, with NCCL_DEBUG=WARN and LOG_LEVEL=ERROR in the job's environment).

v3 prints no SM_CURRENT_INSTANCE_GROUP; sm_train.sh prints resourceconfig.json as one line at every
log level, and at level 20 the drivers dump the whole environment, SM_RESOURCE_CONFIG included.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_hetero.job.resource_config import GroupSpec
from airflow_hetero.logs.mapping import resolve_mapping
from airflow_hetero.logs.patterns import LineRules
from airflow_hetero.logs.streams import StreamLog

FIXTURES = Path(__file__).parents[1] / "data" / "sdk3-drivers"
GROUPS = [GroupSpec("data", "ml.c5.xlarge", 2), GroupSpec("dnn", "ml.p3.2xlarge", 1)]


def _streams(level: str, *, drop: str | None = None, paged: bool = False) -> tuple[list[StreamLog], dict[str, str]]:
    """StreamLogs of a fixture job, fed line by line or a page at a time, without lines starting with ``drop``."""
    kept = json.loads((FIXTURES / f"log{level}" / "hosts.json").read_text())
    streams = []
    for log_file in sorted((FIXTURES / f"log{level}").glob("algo-*.log")):
        host = log_file.stem
        log = StreamLog(f"{kept['job']}/{host}-1796000000", host, LineRules.build())
        lines = [line for line in log_file.read_text().splitlines() if drop is None or not line.startswith(drop)]
        if paged:
            log.add_events([{"timestamp": 1000 + i, "message": line} for i, line in enumerate(lines)])
        else:
            for i, line in enumerate(lines):
                log.add(1000 + i, line)
        streams.append(log)
    return streams, kept["hosts"]


@pytest.mark.parametrize("paged", [False, True])
@pytest.mark.parametrize("level", ["20", "30"])
def test_every_host_maps_from_the_drivers_output(level: str, paged: bool) -> None:
    streams, truth = _streams(level, paged=paged)
    mapping = resolve_mapping(streams, GROUPS)
    assert mapping.host_to_group == truth and sorted(truth.values()) == ["data", "data", "dnn"]
    assert set(mapping.source.values()) == {"resource_config"}
    assert mapping.unmapped == [] and mapping.problems == []
    assert mapping.instance_types == {"data": "ml.c5.xlarge", "dnn": "ml.p3.2xlarge"}


@pytest.mark.parametrize("paged", [False, True])
def test_the_environment_dump_counts_as_no_error_or_warning(paged: bool) -> None:
    streams, _ = _streams("20", paged=paged)
    dumped = [line for line in (FIXTURES / "log20" / "algo-1.log").read_text().splitlines()]
    assert "NCCL_DEBUG=WARN" in dumped and "LOG_LEVEL=ERROR" in dumped  # the fixture really holds them
    assert [(log.errors, log.warnings) for log in streams] == [(0, 0)] * 3


def test_the_quiet_case_maps_through_the_resourceconfig_line_alone() -> None:
    without, _ = _streams("30", drop="{")
    assert resolve_mapping(without, GROUPS).unmapped == ["algo-1", "algo-2", "algo-3"]
    # at level 20 the SM_RESOURCE_CONFIG dump alone still maps every host (the whole map)
    dump_only, truth = _streams("20", drop="{")
    mapping = resolve_mapping(dump_only, GROUPS)
    assert mapping.host_to_group == truth and set(mapping.source.values()) == {"group_map"}


def test_a_resourceconfig_line_naming_another_host_is_ignored() -> None:
    streams, _ = _streams("30")
    line = next(x for x in (FIXTURES / "log30" / "algo-1.log").read_text().splitlines() if x.startswith("{"))
    stranger = StreamLog("job/algo-9-1796000000", "algo-9", LineRules.build())
    stranger.add(1, line)  # algo-1's config printed in algo-9's stream
    mapping = resolve_mapping([*streams, stranger], GROUPS)
    assert "algo-9" in mapping.unmapped
    assert any("resourceconfig.json names host algo-1, not its own host algo-9" in p for p in mapping.problems)


@pytest.mark.parametrize(
    ("line", "errors", "warnings"),
    [
        ("NCCL_DEBUG=WARN", 0, 0),
        ("LOG_LEVEL=ERROR", 0, 0),
        ("TORCH_CPP_LOG_LEVEL=WARNING extra words", 0, 0),
        ("_=/usr/bin/python3 ERROR", 0, 0),
        ("ERROR: the model diverged", 1, 0),
        ("loss=0.3 ERROR in step 3", 1, 0),  # a lower-case name is no environment variable
        ("WARNING: low memory", 0, 1),
    ],
)
def test_only_environment_lines_are_exempt(line: str, errors: int, warnings: int) -> None:
    for paged in (False, True):
        log = StreamLog("job/algo-1-1796000000", "algo-1", LineRules.build())
        if paged:
            log.add_events([{"timestamp": 1, "message": line}, {"timestamp": 2, "message": "done"}])
        else:
            log.add(1, line)
        assert (log.errors, log.warnings) == (errors, warnings)
