"""Behaviour unchanged, proven (issue 35, item 6): what the training operator sends and pushes, against goldens.

Each case of :mod:`golden_cases` runs the operator's real code against the stand-in of
:mod:`support.golden_recorder` and is compared with ``data/<case>.json``: every AWS request in order (operation
and full parameters, a Batch payload parsed), every XCom push (key and value), each deferral (the trigger's class
path and kwargs, the method and its kwargs) and the event it resumed with, and how each step ended. A
difference is printed as a diff of the two JSON texts; it is either a bug fixed (CHANGELOG says which) or a
regression.

``GOLDEN_UPDATE=1`` (re)writes the files from this run. They are written on Airflow 3; on Airflow 2.11 they are
compared only, without the pushes marked ``airflow_3_only`` (the extra links' ``_link_*`` XComs: Airflow 2 has
no ``xcom_key`` on links and calls ``get_link`` instead, airflow_hetero.links.training).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from golden_cases import CASES
from support.golden_recorder import CaseRun, canonical, json_diff

from airflow_hetero._compat import AIRFLOW_V_3

DATA = Path(__file__).parent / "data"
UPDATE = os.environ.get("GOLDEN_UPDATE") == "1"
#: XCom keys only Airflow 3 gets pushed (the extra links' URLs).
AIRFLOW_3_ONLY_PREFIX = "_link_"


def marked(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with each push only Airflow 3 makes marked ``airflow_3_only``."""
    for step in record["steps"]:
        for push in step.get("xcom_pushes", []):
            if str(push["key"]).startswith(AIRFLOW_3_ONLY_PREFIX):
                push["airflow_3_only"] = True
    return record


def as_on_airflow_2(golden: dict[str, Any]) -> dict[str, Any]:
    """The golden without the pushes marked ``airflow_3_only``."""
    steps = [
        {**step, "xcom_pushes": [p for p in step["xcom_pushes"] if not p.get("airflow_3_only")]}
        if "xcom_pushes" in step
        else step
        for step in golden["steps"]
    ]
    return {**golden, "steps": steps}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_operator_sends_and_pushes_what_its_golden_says(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    recorded = json.loads(canonical(marked(CaseRun(CASES[name], monkeypatch).run())))  # as stored: plain JSON
    path = DATA / f"{name}.json"
    if UPDATE and AIRFLOW_V_3:
        DATA.mkdir(exist_ok=True)
        path.write_text(canonical(recorded), encoding="utf-8")
        return
    assert path.exists(), f"no golden {path.name}: record it with GOLDEN_UPDATE=1 (on Airflow 3)"
    golden = json.loads(path.read_text(encoding="utf-8"))
    expected = golden if AIRFLOW_V_3 else as_on_airflow_2(golden)
    difference = json_diff(expected, recorded, path.name)
    if difference:
        pytest.fail(f"the operator's behaviour differs from {path.name}:\n{difference}", pytrace=False)


def test_every_golden_file_is_a_case() -> None:
    stored = {p.stem for p in DATA.glob("*.json")}
    assert stored == set(CASES) or (UPDATE and stored <= set(CASES)), sorted(stored ^ set(CASES))
