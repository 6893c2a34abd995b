"""The task-log summary fits 100 columns however wide its content: host lists wrap, long names stack."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_hetero.logs.table import TABLE_WIDTH, format_table


def group(hosts: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "instance_type": "ml.p4d.24xlarge",
        "instance_count": len(hosts),
        "hosts": hosts,
        "log_streams": [f"job/{h}-1" for h in hosts],
        "events": 123456,
        "errors": 2,
        "warnings": 17,
        "utilization": {
            "cpu": {"avg": 55.5, "max": 99.0, "hosts": len(hosts), "datapoints": 9},
            "memory": {"avg": 0.04, "max": 0.05, "hosts": len(hosts), "datapoints": 9},
            "gpu": None,
            "gpu_memory": None,
        },
        "metrics": {"train:loss": {"last": 0.0123, "best": 0.011, "goal": "min", "count": 40}},
        "error_samples": [{"host": hosts[0], "line": "Traceback: " + "x" * 190, "exception": "RuntimeError: boom"}],
        **extra,
    }


def summary(groups: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "training_job_name": "hetero-retrain-" + "a" * 47,
        "status": "Failed",
        "secondary_status": "Failed",
        "billable_seconds": 660,
        "failure_reason": "AlgorithmError: " + "the training script exited with a long message " * 8,
        "groups": groups,
        "problems": ["group data logged 2 error(s) and this sentence is long enough to need wrapping " * 2],
    }


def test_the_demo_sized_table_is_two_aligned_tables_within_100_columns() -> None:
    table = format_table(summary({"data_group": group(["algo-1", "algo-2"]), "train_group": group(["algo-3"])}))
    lines = table.splitlines()
    assert max(len(line) for line in lines) <= TABLE_WIDTH == 100
    headers = [i for i, line in enumerate(lines) if line.startswith("group ")]
    assert len(headers) == 2  # logs per group, then utilisation per group
    assert lines[headers[0]].split()[:4] == ["group", "instance", "type", "n"]
    assert lines[headers[1]].split()[:3] == ["group", "cpu", "avg/max"]
    row = ["data_group", "ml.p4d.24xlarge", "2", "algo-1,algo-2", "2", "123456", "2", "17"]
    assert lines[headers[0] + 1].split() == row
    assert lines[headers[1] + 1].split() == ["data_group", "56/99", "0.04/0.05", "-", "-"]


def test_many_hosts_wrap_inside_their_column_and_every_host_is_shown() -> None:
    hosts = [f"algo-{n}" for n in range(1, 41)]
    table = format_table(summary({"data_group": group(hosts), "train_group": group(["algo-41"])}))
    lines = table.splitlines()
    assert max(len(line) for line in lines) <= TABLE_WIDTH
    start = next(i for i, line in enumerate(lines) if line.startswith("data_group "))
    column = lines[0 + start].index("algo-1,")
    continued = [line for line in lines[start + 1 :] if line[:column].strip() == ""]
    block = [lines[start], *continued[:10]]
    shown = ",".join(line[column:].split()[0].strip(",") for line in block)
    assert shown.split(",") == hosts  # continuation lines hold the rest of the list, in order
    assert lines[start + len(block)].startswith("train_group ")


@pytest.mark.parametrize("name_length", [40, 64])
def test_group_names_too_long_for_columns_stack_instead_of_being_cut(name_length: int) -> None:
    name = "g" * name_length  # SageMaker allows 64-character instance group names
    table = format_table(summary({name: group(["algo-1", "algo-2"])}))
    lines = table.splitlines()
    assert max(len(line) for line in lines) <= TABLE_WIDTH
    assert f"group {name}" in lines
    assert "  hosts: algo-1,algo-2" in lines  # the logs table no longer fits: stacked
    if name_length == 64:  # nor does the utilisation table
        assert "  cpu avg/max: 56/99" in lines
    else:
        assert any(line.split() == [name, "56/99", "0.04/0.05", "-", "-"] for line in lines)
    text = " ".join(line.strip() for line in lines)
    assert "the training script exited with a long message " * 2 in text + " "  # wrapped, not cut
    assert "RuntimeError: boom" not in text  # error sample lines keep their 200-character cap
