"""Pure tests of airflow_hetero.logs.streams: line rules, stream accumulation, host -> group mapping."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_hetero.job.resource_config import GroupSpec
from airflow_hetero.job.resource_config import instance_groups as groups_from_describe
from airflow_hetero.logs.mapping import resolve_mapping
from airflow_hetero.logs.patterns import DEFAULT_ERROR_PATTERNS, LineRules, metric_goal
from airflow_hetero.logs.streams import MAX_LINE_CHARS, StreamLog, host_from_stream, parse_group_map
from airflow_hetero.runtime import format_marker

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "sagemaker-training-startup-algo-2.log"
T0 = 1_700_000_000_000


def stream(host: str, lines: list[str], rules: LineRules | None = None, **kwargs: int) -> StreamLog:
    log = StreamLog(f"job/{host}-1700000000", host, rules or LineRules.build(), **kwargs)
    for i, line in enumerate(lines):
        log.add(T0 + i, line)
    return log


def resource_config(groups: dict[str, list[str]], current: str, types: dict[str, str] | None = None) -> str:
    current_group = next(g for g, hosts in groups.items() if current in hosts)
    return "SM_RESOURCE_CONFIG=" + json.dumps(
        {
            "current_host": current,
            "current_group_name": current_group,
            "hosts": sorted(h for hosts in groups.values() for h in hosts),
            "instance_groups": [
                {"instance_group_name": g, "instance_type": (types or {}).get(g, "ml.m5.xlarge"), "hosts": h}
                for g, h in groups.items()
            ],
        },
        separators=(",", ":"),
    )


# -- small helpers -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "host"),
    [
        ("job/algo-2-1700000000", "algo-2"),
        ("job/algo-12-1699999999", "algo-12"),
        ("job/algo-1", "algo-1"),
        ("other/algo-3-1700000000", "algo-3"),
        ("algo-4-1700000000", "algo-4"),
    ],
)
def test_host_from_stream(name: str, host: str) -> None:
    assert host_from_stream(name, "job") == host


def test_host_from_stream_job_name_with_slash_like_prefix() -> None:
    assert host_from_stream("my-job-1/algo-1-1700000000", "my-job-1") == "algo-1"


@pytest.mark.parametrize(
    ("name", "goal"),
    [
        ("train:loss", "min"),
        ("Validation-Error", "min"),
        ("val_LOSS", "min"),
        ("accuracy", "max"),
        ("f1", "max"),
    ],
)
def test_metric_goal(name: str, goal: str) -> None:
    assert metric_goal(name) == goal


@pytest.mark.parametrize(
    "line",
    [
        "Traceback (most recent call last):",
        "2024-01-01 sagemaker-training-toolkit ERROR    Reporting training FAILURE",
        "ERROR: something broke",
        "[ERROR] worker 3 died",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, unhandled system error",
        "ncclInternalError: Internal check failed",
        "ncclSystemError: ncclUnhandledCudaError ncclInvalidUsageError",
        "NCCL failure: ncclRemoteError (peer died)",
        "ncclInvalidArgumentError",
        "[12345.678] Out of memory: Killed process 4242 (python3)",
        "Killed",
        "MemoryError",
        "ExecuteUserScriptError: ExitCode 137",
        "CRITICAL: disk full",
    ],
)
def test_default_error_patterns_match(line: str) -> None:
    log = stream("algo-1", [line])
    assert log.errors == 1, line
    assert log.error_samples[0].line == line


@pytest.mark.parametrize(
    "line",
    [
        "epoch 1 train:error=0.25 loss=0.3",
        'SM_FRAMEWORK_PARAMS={"sagemaker_mpi_custom_mpi_options":"--NCCL_DEBUG WARN"}',
        '    "sagemaker_mpi_custom_mpi_options": "--NCCL_DEBUG WARN"',
        "no errors found, skilled workers",
        "ERRORS_ALLOWED=3",
        "mean_error: 0.1",
        "ncclSuccessError is no NCCL result; ValueError: InternalError",
    ],
)
def test_default_patterns_do_not_flag_ordinary_lines(line: str) -> None:
    log = stream("algo-1", [line])
    assert (log.errors, log.warnings) == (0, 0), line


@pytest.mark.parametrize(
    "line",
    [
        "WARNING:root:slow step",
        "NCCL WARN Net : connection closed",
        "UserWarning: deprecated thing",
        "[WARN] x",
    ],
)
def test_default_warning_patterns(line: str) -> None:
    log = stream("algo-1", [line])
    assert (log.errors, log.warnings) == (0, 1), line


def test_fixture_startup_block_is_neither_error_nor_warning_and_gives_the_map() -> None:
    log = stream("algo-2", FIXTURE.read_text().splitlines())
    assert (log.errors, log.warnings) == (0, 0)
    assert (log.current_host, log.current_group) == ("algo-2", "data_group")
    assert log.group_map == {
        "data_group": {"instance_type": "ml.c5.18xlarge", "hosts": ["algo-2", "algo-3"]},
        "dnn_group": {"instance_type": "ml.p4d.24xlarge", "hosts": ["algo-1"]},
    }


def test_custom_error_patterns_replace_defaults_and_empty_means_none() -> None:
    custom = LineRules.build(error_patterns=[r"boom"], warning_patterns=[])
    log = stream("algo-1", ["ERROR x", "boom!", "WARNING y"], custom)
    assert (log.errors, log.warnings) == (1, 0)
    flagged = LineRules.build(error_patterns=["(?i)boom", "fatal"])  # global flag: searched one by one
    log = stream("algo-1", ["BOOM", "fatal x", "FATAL y", "calm"], flagged)
    assert log.errors == 2  # (?i) belongs to its own pattern: "fatal" stays case-sensitive
    backrefs = LineRules.build(error_patterns=[r"(a)\1", r"(b)\1"], warning_patterns=[])
    log = stream("algo-1", ["aa", "bb", "ab", "ba"], backrefs)
    assert log.errors == 2  # each \1 means its own pattern's group
    with pytest.raises(ValueError, match="invalid pattern"):
        LineRules.build(error_patterns=["(unclosed"])
    with pytest.raises(ValueError, match="invalid regex for metric"):
        LineRules.build(metric_definitions=[{"Name": "m", "Regex": "(x"}])
    with pytest.raises(ValueError, match="needs Name and Regex"):
        LineRules.build(metric_definitions=[{"Name": "m"}])
    assert len(DEFAULT_ERROR_PATTERNS) >= 5


def test_traceback_counts_once_and_keeps_exception_line() -> None:
    lines = [
        "Traceback (most recent call last):",
        '  File "train.py", line 3, in <module>',
        '    raise RuntimeError("ERROR in step")',
        "RuntimeError: CUDA error: out of memory",
        "after",
        "ERROR second",
    ]
    log = stream("algo-1", lines)
    assert log.errors == 2
    first, second = log.error_samples
    assert first.line.startswith("Traceback")
    assert first.exception == "RuntimeError: CUDA error: out of memory"
    assert (second.line, second.exception) == ("ERROR second", None)


def test_output_interleaved_with_a_traceback_is_not_its_exception() -> None:
    """stdout and stderr reach CloudWatch apart: a print just before the crash can sort inside the traceback."""
    lines = [
        "Traceback (most recent call last):",
        '  File "train.py", line 9, in <module>',
        "epoch=3 loss=0.6 acc=0.8",  # printed to stdout just before the raise
        '    raise RuntimeError("NCCL error: unhandled system error")',
        "RuntimeError: NCCL error: unhandled system error",
    ]
    rules = LineRules.build(metric_definitions=[{"Name": "loss", "Regex": "loss=([0-9.]+)"}])
    log = stream("algo-1", lines, rules=rules)
    (sample,) = log.error_samples
    assert sample.exception == "RuntimeError: NCCL error: unhandled system error"
    assert log.metrics["loss"].last == 0.6  # the interleaved line still counts for its metric


def test_a_traceback_left_open_by_other_output_closes_after_a_bound() -> None:
    lines = ["Traceback (most recent call last):", '  File "x.py", line 1'] + [f"step={i}" for i in range(25)]
    lines.append("ERROR later")
    log = stream("algo-1", lines)
    assert log.errors == 2 and log.error_samples[0].exception is None


def test_error_samples_are_bounded_and_first_ones_kept() -> None:
    log = stream("algo-1", [f"ERROR {i}" for i in range(50)], max_error_samples=3)
    assert log.errors == 50
    assert [s.line for s in log.error_samples] == ["ERROR 0", "ERROR 1", "ERROR 2"]


def test_tail_is_bounded_skips_blank_lines_and_clips_huge_lines() -> None:
    huge = "x" * 300_000
    log = stream("algo-1", [*(f"line {i}" for i in range(100)), "", "   ", huge], tail_lines=5)
    assert log.events == 103
    assert [line for _, line in log.tail][:4] == ["line 96", "line 97", "line 98", "line 99"]
    last = log.tail[-1][1]
    assert len(last) < MAX_LINE_CHARS + 40 and last.endswith(f"[+{300_000 - MAX_LINE_CHARS} chars]")
    assert log.byte_count == sum(len(f"line {i}") for i in range(100)) + 3 + 300_000


def test_bytes_messages_and_multiline_events() -> None:
    log = StreamLog("job/algo-1-1700000000", "algo-1", LineRules.build(), tail_lines=5)
    log.add(T0, b"bad \xff\xfe bytes ERROR here")
    log.add(T0 + 1, "first\nERROR: second\r\nthird")
    assert log.events == 2
    assert log.errors == 2
    assert log.tail[0][1] == "bad \ufffd\ufffd bytes ERROR here"
    assert [line for _, line in log.tail][1:] == ["first", "ERROR: second", "third"]
    assert (log.first_time, log.last_time) == (T0, T0 + 1)


def test_metrics_last_and_best_per_goal() -> None:
    rules = LineRules.build(
        metric_definitions=[
            {"Name": "train:loss", "Regex": r"loss=([0-9.]+)"},
            {"Name": "val:acc", "Regex": r"acc=([0-9.]+)"},
            {"Name": "throughput", "Regex": r"[0-9.]+ samples/s"},
        ]
    )
    log = stream(
        "algo-1",
        ["loss=0.9 acc=0.5", "loss=0.2 acc=0.8", "loss=0.4 acc=0.7", "loss=abc", "12.5 samples/s"],
        rules,
    )
    assert (log.metrics["train:loss"].last, log.metrics["train:loss"].best) == (0.4, 0.2)
    assert (log.metrics["val:acc"].last, log.metrics["val:acc"].best) == (0.7, 0.8)
    assert log.metrics["train:loss"].count == 3
    assert "throughput" not in log.metrics  # no capture group: group(0) is not a number


def test_parse_group_map_rejects_bad_shapes() -> None:
    assert parse_group_map("SM_RESOURCE_CONFIG", '{"instance_groups": [') is None
    assert parse_group_map("SM_RESOURCE_CONFIG", "[]") is None
    assert parse_group_map("SM_RESOURCE_CONFIG", '{"hosts": ["algo-1"]}') is None
    assert parse_group_map("SM_INSTANCE_GROUPS_DICT", '{"a": {"hosts": "algo-1"}}') is None
    assert parse_group_map("SM_INSTANCE_GROUPS_DICT", '{"a": {"instance_group_name": "a", "hosts": ["algo-1"]}}') == {
        "a": {"instance_type": None, "hosts": ["algo-1"]}
    }


# -- mapping ------------------------------------------------------------------------------------

GROUPS_AB = [GroupSpec("A", "ml.c5.xlarge", 1), GroupSpec("B", "ml.p3.2xlarge", 2)]


def test_mapping_with_crossed_host_numbers() -> None:
    """Group A = [algo-2], group B = [algo-3, algo-1]: numbers say nothing about groups."""
    layout = {"A": ["algo-2"], "B": ["algo-3", "algo-1"]}
    logs = [
        stream("algo-1", [format_marker("algo-1", "B", "ml.p3.2xlarge"), "training"]),  # only the marker
        stream(
            "algo-2",
            ["SM_CURRENT_HOST=algo-2", "SM_CURRENT_INSTANCE_GROUP=A", resource_config(layout, "algo-2")],
        ),
        stream("algo-3", ["[1,1]<stdout>: worker step 1"]),  # MPI worker: no start-up block
    ]
    mapping = resolve_mapping(logs, GROUPS_AB)
    assert mapping.host_to_group == {"algo-1": "B", "algo-2": "A", "algo-3": "B"}
    assert mapping.source == {"algo-1": "marker", "algo-2": "toolkit", "algo-3": "group_map"}
    assert mapping.unmapped == [] and mapping.problems == []


def test_instance_groups_dict_also_gives_the_map() -> None:
    groups_dict = {
        "A": {"instance_group_name": "A", "instance_type": "ml.c5.xlarge", "hosts": ["algo-2"]},
        "B": {"instance_group_name": "B", "instance_type": "ml.p3.2xlarge", "hosts": ["algo-1"]},
    }
    logs = [
        stream("algo-1", ["hello"]),
        stream("algo-2", ["SM_INSTANCE_GROUPS_DICT=" + json.dumps(groups_dict)]),
    ]
    mapping = resolve_mapping(logs, GROUPS_AB)
    assert mapping.host_to_group == {"algo-1": "B", "algo-2": "A"}
    assert mapping.instance_types == {"A": "ml.c5.xlarge", "B": "ml.p3.2xlarge"}


def test_marker_beats_toolkit_lines_and_disagreement_is_reported() -> None:
    logs = [
        stream(
            "algo-1",
            [
                "SM_CURRENT_HOST=algo-1",
                "SM_CURRENT_INSTANCE_GROUP=A",
                format_marker("algo-1", "B", "ml.p3.2xlarge"),
            ],
        )
    ]
    mapping = resolve_mapping(logs, GROUPS_AB)
    assert mapping.host_to_group == {"algo-1": "B"}
    assert mapping.source == {"algo-1": "marker"}
    assert any("toolkit evidence says A" in p for p in mapping.problems)


def test_unmapped_hosts_are_listed_not_guessed() -> None:
    logs = [
        stream("algo-1", [format_marker("algo-1", "A", "ml.c5.xlarge")]),
        stream("algo-2", ["no evidence at all"]),
        stream("algo-3", ["still none"]),
    ]
    mapping = resolve_mapping(logs, GROUPS_AB)
    assert mapping.host_to_group == {"algo-1": "A"}
    assert mapping.unmapped == ["algo-2", "algo-3"]


def test_single_group_job_maps_every_host() -> None:
    logs = [stream("algo-1", ["x"]), stream("algo-2", ["y"])]
    mapping = resolve_mapping(logs, [GroupSpec("only", "ml.c5.xlarge", 2)])
    assert mapping.host_to_group == {"algo-1": "only", "algo-2": "only"}
    assert set(mapping.source.values()) == {"single_group"}


def test_homogeneous_describe_is_one_group() -> None:
    specs = groups_from_describe({"ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 3}})
    assert specs == [GroupSpec("homogeneousCluster", "ml.m5.large", 3)]
    assert groups_from_describe(None) == []
    assert groups_from_describe({"ResourceConfig": {}}) == []


def test_conflicting_evidence_at_one_level_falls_through() -> None:
    logs = [
        stream("algo-1", [format_marker("algo-1", "A", "t"), format_marker("algo-1", "B", "t")]),
    ]
    assert logs[0].marker == {"algo-1": "A"}  # first marker of a stream wins
    second = StreamLog("job/algo-1-1700000999", "algo-1", LineRules.build())  # the host's second stream
    second.add(T0, format_marker("algo-1", "B", "t"))
    mapping = resolve_mapping([*logs, second], GROUPS_AB)
    assert "algo-1" in mapping.unmapped
    assert any("several groups" in p for p in mapping.problems)


def test_a_marker_from_another_hosts_stream_is_ignored_and_reported() -> None:
    """One forged line in algo-9's stream must not move algo-1 away from its own toolkit lines."""
    own = stream("algo-1", ["SM_CURRENT_HOST=algo-1", "SM_CURRENT_INSTANCE_GROUP=A"])
    forger = stream(
        "algo-9", [format_marker("algo-1", "B", "t"), "SM_CURRENT_HOST=algo-1", "SM_CURRENT_INSTANCE_GROUP=B"]
    )
    mapping = resolve_mapping([own, forger], GROUPS_AB)
    assert mapping.host_to_group["algo-1"] == "A" and mapping.source["algo-1"] == "toolkit"
    assert "job/algo-9-1700000000: marker names host algo-1 (group B), not its own host algo-9; ignored" in (
        mapping.problems
    )
    assert any("SM_CURRENT_HOST=algo-1 is not its own host algo-9" in p for p in mapping.problems)


def test_cross_check_reports_too_many_hosts_and_unknown_groups() -> None:
    layout = {"A": ["algo-1", "algo-2"], "C": ["algo-3"]}
    logs = [stream("algo-1", [resource_config(layout, "algo-1")])]
    mapping = resolve_mapping(logs, GROUPS_AB)
    assert any("group A: 2 hosts mapped (algo-1, algo-2) but InstanceCount is 1" in p for p in mapping.problems)
    assert any("group C (algo-3) is not in the job's ResourceConfig" in p for p in mapping.problems)
