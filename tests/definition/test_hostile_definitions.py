"""Hostile definition files are refused with one line naming the file and the limit, exit 2.

The files are the ones from the issue report (benchmarks/hostile_definitions.py makes them and
times them; no timing here). Names with control or look-alike characters are shown escaped.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_hetero.cli import main
from airflow_hetero.definition.errors import JobDefinitionError, Problem
from airflow_hetero.definition.input_file import InputLimits, read_definition_file
from airflow_hetero.definition.job import load_job
from benchmarks import hostile_definitions as hostile

CASES = [
    ("bomb.yaml", hostile.anchor_bomb(), "nodes", "once YAML aliases are expanded"),
    ("bomb-tags.yaml", hostile.anchor_bomb("tags"), "nodes", "once YAML aliases are expanded"),
    ("bomb-dist.yaml", hostile.anchor_bomb("distribution"), "nodes", "once YAML aliases are expanded"),
    ("deep.yaml", hostile.deep_nesting(), "depth", "nesting deeper than 32 levels"),
    ("deep.json", hostile.deep_json(), "depth", "nesting deeper than 32 levels"),
    ("int.yaml", hostile.long_integer(), "int_digits", "an integer with 5000 digits"),
    ("int.json", '{"hyperparameters": {"epochs": ' + "7" * 5000 + "}}", "int_digits", "5000 digits"),
]


@pytest.mark.parametrize(("name", "text", "field", "what"), CASES, ids=[c[0] for c in CASES])
def test_cli_refuses_with_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, field: str, what: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"{path}: too large: ") and what in err[0]
    assert f"({field}, set AIRFLOW_HETERO_MAX_DEFINITION_{field.upper()} to change it)" in err[0]


def test_the_anchor_bomb_is_the_reported_size() -> None:
    assert len(hostile.anchor_bomb().encode()) == 926


def test_big_file_is_refused_without_reading_it_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "big.yaml"
    with path.open("w") as handle:  # 61 MB, sparse on disk
        handle.write(hostile.valid())
        handle.seek(61 * 1024 * 1024)
        handle.write("\n")
    assert main(["validate", str(path)]) == 2
    line = capsys.readouterr().err.strip()
    assert line == (
        f"{path}: too large: the file is {path.stat().st_size} bytes; the limit is 1048576 "
        "(bytes, set AIRFLOW_HETERO_MAX_DEFINITION_BYTES to change it)"
    )


def test_limits_are_configurable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(hostile.valid())
    monkeypatch.setenv("AIRFLOW_HETERO_MAX_DEFINITION_BYTES", "100")
    with pytest.raises(JobDefinitionError, match=r"the limit is 100 \(bytes"):
        load_job(path)
    assert load_job(path, limits=InputLimits(bytes=10_000)).hyperparameters == {"epochs": 10}
    monkeypatch.setenv("AIRFLOW_HETERO_MAX_DEFINITION_DEPTH", "zero")
    with pytest.raises(JobDefinitionError, match="MAX_DEFINITION_DEPTH must be a positive integer"):
        load_job(path)


def test_ordinary_aliases_within_the_limits_still_work(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(
        hostile.HEAD.replace("instance_type: ml.c5.xlarge", "instance_type: &small ml.c5.xlarge")
        + "hyperparameters: &hp {epochs: 10, lr: 0.1}\nenvironment: {TYPE: *small}\n"
    )
    job = load_job(path)
    assert job.environment == {"TYPE": "ml.c5.xlarge"} and job.hyperparameters == {"epochs": 10, "lr": 0.1}


def test_a_recursive_alias_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "loop.yaml"
    path.write_text(hostile.HEAD + "hyperparameters: &loop {self: *loop}\n")
    with pytest.raises(JobDefinitionError, match="refers to a value containing itself"):
        read_definition_file(path)


def test_depth_through_aliases_is_counted(tmp_path: Path) -> None:
    lines = [hostile.HEAD + "hyperparameters:", "  l0: &l0 [1]"]
    lines += [f"  l{i}: &l{i} [*l{i - 1}]" for i in range(1, 40)]
    path = tmp_path / "chain.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(JobDefinitionError, match="nesting deeper than 32 levels through YAML aliases"):
        read_definition_file(path)


def test_many_values_are_refused_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "wide.json"
    path.write_text('{"hyperparameters": [' + ",".join(["1"] * 30_000) + "]}")
    with pytest.raises(JobDefinitionError, match="more than 20000 values"):
        read_definition_file(path)


# -- names in messages ---------------------------------------------------------------------------


def test_lookalike_group_name_is_escaped_and_explained(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "job.yaml"
    cyrillic_o = "\u043e"
    path.write_text(
        hostile.HEAD + f"inputs:\n  train: {{s3_data: 's3://b/t', instance_groups: [dnn_gr{cyrillic_o}up]}}\n",
        encoding="utf-8",
    )
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.isascii()
    assert "unknown instance group 'dnn_gr\\u043eup'" in err
    assert "differs from 'dnn_group' only by look-alike characters (\\u043e CYRILLIC SMALL LETTER O)" in err


def test_two_groups_that_look_the_same_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(
        hostile.HEAD + "  - {instance_group_name: d\u0430ta_group, instance_type: ml.c5.xlarge, instance_count: 1}\n",
        encoding="utf-8",
    )
    with pytest.raises(JobDefinitionError) as info:
        load_job(path)
    assert any("looks the same as another group's" in p.msg and "\\u0430" in p.msg for p in info.value.problems)


def test_control_characters_never_reach_the_terminal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(hostile.HEAD + 'inputs:\n  "evil\\e[2J\\x07": {s3_data: "s3://b/t"}\n')
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err
    assert "evil\\x1b[2J\\x07" in err


def test_problem_escapes_its_location_and_message() -> None:
    problem = Problem("inputs.\x1b[31m", "name '\u0430\n'")
    assert (problem.loc, problem.msg) == ("inputs.\\x1b[31m", "name '\\u0430\\x0a'")
