"""The parse-time validation cache: unchanged definitions skip pydantic, bad ones always fail."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.example_jobs import Group, example_job

import airflow_hetero
from airflow_hetero.definition import JobDefinitionError, validated

GOOD = example_job(
    image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1",
    entry_point=None,
    source_dir=None,
    output_path="s3://my-bucket/output",
    groups=[Group("data", "ml.c5.xlarge", 2), Group("dnn", "ml.p3.2xlarge")],
    inputs={"train": {"s3_data": "s3://my-bucket/train", "instance_groups": ["dnn"]}},
)
BAD = {**GOOD, "instance_groups": [{"instance_group_name": "data", "instance_type": "ml.bogus", "instance_count": 1}]}
#: How long a fresh interpreter may take to import what the test checks (Airflow, on a loaded 2-core machine).
IMPORT_TIMEOUT = 120


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AIRFLOW_HETERO_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _markers(folder: Path) -> list[Path]:
    """The validation markers (not the compiled request shapes kept beside them in ``shapes/``)."""
    found = folder.rglob("*") if folder.exists() else []
    return [p for p in found if p.is_file() and p.parent.name != "shapes"]


def _validate_in_fresh_process(definition: dict[str, Any], cache: Path) -> dict[str, Any]:
    code = (
        "import json, sys\n"
        "from airflow_hetero.definition.validated import validate_once\n"
        f"validate_once(json.loads({json.dumps(json.dumps(definition))}))\n"
        "print(json.dumps({'pydantic': 'pydantic' in sys.modules,"
        " 'job': 'airflow_hetero.definition.job' in sys.modules,"
        " 'botocore model': 'airflow_hetero.definition.facts.service_model' in sys.modules}))\n"
    )
    env = {**os.environ, "AIRFLOW_HETERO_CACHE_DIR": str(cache)}
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, timeout=IMPORT_TIMEOUT, capture_output=True, text=True, env=env
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def test_second_parse_of_an_unchanged_definition_imports_no_pydantic(cache: Path) -> None:
    first = _validate_in_fresh_process(GOOD, cache)
    second = _validate_in_fresh_process(GOOD, cache)
    assert first == {"pydantic": True, "job": True, "botocore model": True}
    assert second == {"pydantic": False, "job": False, "botocore model": False}
    assert len(_markers(cache)) == 1


def test_a_bad_definition_fails_every_time_and_is_never_remembered(cache: Path) -> None:
    for _ in range(2):
        with pytest.raises(JobDefinitionError, match=r"instance_groups\[0\]\.instance_type"):
            validated.validate_once(BAD)
    assert _markers(cache) == []


def test_any_change_to_the_definition_is_a_new_key(cache: Path) -> None:
    validated.validate_once(GOOD)
    changed = json.loads(json.dumps(GOOD))
    changed["instance_groups"][0]["instance_type"] = "ml.bogus"
    with pytest.raises(JobDefinitionError):
        validated.validate_once(changed)
    assert validated.definition_key(GOOD) != validated.definition_key(changed)
    # key order does not matter; types do (1 and 1.0 and True may validate differently)
    assert validated.definition_key(dict(reversed(list(GOOD.items())))) == validated.definition_key(GOOD)
    assert validated.definition_key({**GOOD, "max_run": 1}) != validated.definition_key({**GOOD, "max_run": True})
    assert validated.definition_key({**GOOD, "max_run": 1}) != validated.definition_key({**GOOD, "max_run": 1.0})
    # a mapping and a list of its pairs, a string and its repr, differ too
    assert validated.definition_key({**GOOD, "tags": {"a": "b"}}) != validated.definition_key(
        {**GOOD, "tags": [["a", "b"]]}
    )
    assert validated.definition_key({**GOOD, "role": "1"}) != validated.definition_key({**GOOD, "role": 1})
    assert validated.definition_key({**GOOD, "role": "'x'"}) != validated.definition_key({**GOOD, "role": "x"})


def test_a_new_version_or_another_environment_is_a_new_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment is read once, when the module is imported (a new release or environment is a new process)."""
    before, here = validated.definition_key(GOOD), validated.environment()
    for name, value in (("airflow_hetero.__version__", "99.0.0"), ("sys.prefix", "/elsewhere")):
        monkeypatch.setattr(name, value)
        elsewhere = validated.environment()
        assert elsewhere != here
        monkeypatch.setattr(validated, "_WHERE", elsewhere)
        assert validated.definition_key(GOOD) != before
        monkeypatch.undo()
    assert validated.definition_key(GOOD) == before


def test_the_marker_lists_code_data_botocore_model_and_pydantic() -> None:
    paths = validated.dependencies()
    assert paths is not None
    names = [Path(p).name for p in paths]
    assert "model.py" in names and "cross_field.py" in names and "validated.py" in names
    # request mode's room: a change to its rules must invalidate a remembered request too
    assert "service_rules.py" in names and "training_request.py" in names
    assert any(p.endswith(".json") and "/definition/data/" in p for p in paths)
    assert any(n.startswith("service-2.json") for n in names)
    assert any("/pydantic/" in p for p in paths) and any("/pydantic_core/" in p for p in paths)


@pytest.fixture
def spied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[Any]]:
    """Validation depends on one file of the test's; the list records each real validation."""
    code = tmp_path / "code"
    code.mkdir()
    dependency = code / "cross_field.py"
    dependency.write_text("v1")
    monkeypatch.setattr(validated, "dependencies", lambda: [str(code), str(dependency)])
    calls: list[Any] = []
    from airflow_hetero.definition import job

    real = job.load_job

    def load_job(data: Any) -> Any:
        calls.append(data)
        return real(data)

    monkeypatch.setattr(job, "load_job", load_job)
    return dependency, calls


def test_a_changed_dependency_means_validating_again(cache: Path, spied: tuple[Path, list[Any]]) -> None:
    dependency, calls = spied
    validated.validate_once(GOOD)
    validated.validate_once(GOOD)
    assert len(calls) == 1
    dependency.write_text("v2, a longer file")
    validated.validate_once(GOOD)
    validated.validate_once(GOOD)
    assert len(calls) == 2
    os.utime(dependency, ns=(1, 1))  # only the times change
    validated.validate_once(GOOD)
    assert len(calls) == 3
    dependency.unlink()
    validated.validate_once(GOOD)
    assert len(calls) == 4


def test_a_remembered_success_does_not_outlive_a_change_that_breaks_it(
    cache: Path, spied: tuple[Path, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    dependency, _ = spied
    validated.validate_once(GOOD)
    assert len(_markers(cache)) == 1
    dependency.write_text("stricter rules")

    def refuse(data: Any) -> Any:
        raise JobDefinitionError([])

    from airflow_hetero.definition import job

    monkeypatch.setattr(job, "load_job", refuse)
    with pytest.raises(JobDefinitionError):
        validated.validate_once(GOOD)
    assert _markers(cache) == []


def test_a_damaged_marker_is_only_a_miss(cache: Path, spied: tuple[Path, list[Any]]) -> None:
    _, calls = spied
    validated.validate_once(GOOD)
    (marker,) = _markers(cache)
    for damage in ("", "other header\nx", "\udcff not utf-8"):
        marker.write_bytes(damage.encode("utf-8", "surrogateescape"))
        validated.validate_once(GOOD)
    assert len(calls) == 4
    validated.validate_once(GOOD)
    assert len(calls) == 4


@pytest.mark.parametrize(
    "odd",
    [
        {**GOOD, "tags": ({"Key": "a", "Value": "b"},)},  # a tuple could validate unlike a list
        {**GOOD, "hyperparameters": {1: "x"}},  # a non-string key
        {**GOOD, "hyperparameters": {"lr": float("nan")}},  # not JSON
        {**GOOD, "hyperparameters": {"obj": object()}},
        {**GOOD, "hyperparameters": {"lr": float("inf")}},
        {**GOOD, "role": type("Text", (str,), {})("arn:aws:iam::123456789012:role/R")},  # a subclass of str
    ],
)
def test_definitions_json_cannot_describe_exactly_are_validated_every_time(cache: Path, odd: dict[str, Any]) -> None:
    assert validated.definition_key(odd) is None
    with contextlib.suppress(JobDefinitionError):
        validated.validate_once(odd)
    assert _markers(cache) == []


def test_an_unwritable_cache_only_means_validating_every_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("AIRFLOW_HETERO_CACHE_DIR", str(blocker / "cache"))
    validated.validate_once(GOOD)  # no error
    with pytest.raises(JobDefinitionError):
        validated.validate_once(BAD)


def test_the_cache_can_be_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_HETERO_CACHE_DIR", "off")
    assert airflow_hetero.cache_dir() is None
    validated.validate_once(GOOD)
    monkeypatch.delenv("AIRFLOW_HETERO_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert airflow_hetero.cache_dir() == tmp_path / "xdg" / "airflow-hetero"


def test_the_operator_still_refuses_a_bad_definition_at_parse_time_after_a_good_one(cache: Path) -> None:
    from airflow_hetero.operators import HeteroTrainingOperator

    HeteroTrainingOperator(task_id="good", job=GOOD)
    HeteroTrainingOperator(task_id="good_again", job=GOOD)  # from the cache
    assert len(_markers(cache)) == 1
    with pytest.raises(JobDefinitionError):
        HeteroTrainingOperator(task_id="bad", job=BAD)


def test_the_performance_page_example_runs(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "performance.md").read_text(encoding="utf-8")
    (snippet,) = [b.split("```", 1)[0] for b in page.split("```python\n")[1:]]
    exec(compile(snippet, "performance.md", "exec"), {})
    assert len(capsys.readouterr().out.strip()) == 12
    assert len(_markers(cache)) == 1


def test_a_request_is_remembered_under_its_own_key(cache: Path) -> None:
    """Request mode's parse-time check uses the same markers, never mistaking a request for a definition."""
    from support.moto_jobs import hetero_request

    request = hetero_request("cached-request")
    validated.validate_once(request, request=True)
    assert len(_markers(cache)) == 1
    assert validated.definition_key(request, request=True) != validated.definition_key(request)
    with pytest.raises(JobDefinitionError, match="unknown field 'RoleArn'"):
        validated.validate_once(request)  # as a definition it is invalid, whatever the request marker says
    bad = hetero_request("cached-request", ResourceConfig={"InstanceGroups": []})
    for _ in range(2):
        with pytest.raises(JobDefinitionError, match="Either InstanceType and InstanceCount or InstanceGroups"):
            validated.validate_once(bad, request=True)
    assert len(_markers(cache)) == 1
