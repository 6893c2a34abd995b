"""`make test` runs the test files that involve no Airflow once (support/airflow_free.py): the choice holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from support.airflow_free import AIRFLOW_FREE_PARTS, involves_airflow, runs_in

TESTS = Path(__file__).resolve().parents[1]
SUPPORT = TESTS / "support"
#: A fresh interpreter importing every Airflow-free test module (pytest, moto, the package) on a loaded machine.
IMPORT_TIMEOUT = 180


def _free_files() -> list[Path]:
    return [
        f
        for f in sorted(TESTS.rglob("test_*.py"))
        if f.relative_to(TESTS).parts[0] in AIRFLOW_FREE_PARTS and not involves_airflow(f, SUPPORT)
    ]


def test_what_reaches_airflow_counts_directly_through_support_modules_or_the_docs(tmp_path: Path) -> None:
    support = tmp_path / "support"
    support.mkdir()
    (support / "plain.py").write_text("import json\n")
    (support / "runs_dags.py").write_text("from support.plain import x\nimport airflow.sdk\n")
    (support / "doc_examples.py").write_text("import subprocess\n")
    cases = {
        "from airflow_hetero.definition import load_job\n": False,
        "from support.plain import x\n": False,
        "from airflow_hetero.operators import HeteroTrainingOperator\n": True,
        "from support.runs_dags import y\n": True,
        "from support.doc_examples import run_example\n": True,
        "def test(dag):\n    dag.test()\n": True,
        'cmd = [sys.executable, "-m", "airflow", "db", "migrate"]\n': True,
    }
    for i, (text, expected) in enumerate(cases.items()):
        test_file = tmp_path / f"test_{i}.py"
        test_file.write_text(text)
        assert involves_airflow(test_file, support) is expected, text


def test_the_files_run_once_import_no_airflow() -> None:
    files = _free_files()
    assert any(f.relative_to(TESTS).parts[0] == "local" for f in files)  # the endpoint's tests are the bulk
    shares = {runs_in(f.relative_to(TESTS).as_posix()) for f in files}
    assert shares == {"airflow3", "airflow2"}  # each suite runs its share, and only one suite runs a file
    code = (
        "import importlib.util, json, sys\n"
        "for path in sys.argv[1:]:\n"
        "    spec = importlib.util.spec_from_file_location(path.rsplit('/', 1)[-1][:-3], path)\n"
        "    spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "print(json.dumps(sorted(m for m in sys.modules if m == 'airflow' or m.startswith('airflow.'))))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(
        [sys.executable, "-c", code, *map(str, files)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        timeout=IMPORT_TIMEOUT,
    ).stdout
    assert json.loads(out.strip().splitlines()[-1]) == []
