"""Which test files involve no Airflow, so that `make test` runs them once, not in both suites.

The parts under test here import no Airflow, not even inside a function (import-linter contracts in
pyproject.toml hold ``definition``, ``pricing``, ``logs``, ``runtime`` and the offline endpoint to it; ``job``
is not among them: it raises Airflow's exceptions), and the two suites' venvs differ
in Airflow and what its constraints pin, not in the libraries those parts use. A test file of those parts that
reaches Airflow anyway (an operator on the endpoint, ``dag.test()``, the ``airflow`` command, a support module
that does) counts as involving it and runs in both suites. Read from the text of the file and of the support
modules it imports, transitively: a mention anywhere counts, so a doubt runs the file twice rather than once.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["AIRFLOW_FREE_PARTS", "IN_THE_2_11_SUITE", "involves_airflow", "runs_in"]

#: The folders of tests/ whose subjects import no Airflow.
AIRFLOW_FREE_PARTS = frozenset({"local", "runtime", "logs", "definition", "pricing"})
#: What shows that a file reaches Airflow: an import of it or of the package's Airflow-facing parts, a DAG run,
#: the ``airflow`` or ``airflow-hetero`` command, a test that depends on the Airflow version.
_AIRFLOW = re.compile(
    r"from airflow[ .]|import airflow(?![_\w])|"
    r"airflow_hetero\.(operators|sensors|triggers|hooks|_compat|links|plugins|lineage|cli|demo|example_dags"
    r"|task_arguments)|"
    r"\.test\(|AIRFLOW_V_3|\"-m\", \"airflow\"|\"-m\", \"airflow_hetero\"|\"airflow-hetero\""
)
#: Support modules that run code this text does not show (the docs' examples): a file using one involves Airflow.
_RUNS_OTHER_CODE = frozenset({"doc_examples"})
#: The folders whose Airflow-free files `make test` runs in the Airflow 2.11 suite (the others' run in the Airflow 3
#: suite): the 2.11 suite has fewer tests of its own, so the two end together.
IN_THE_2_11_SUITE = ("local/host", "local/batch", "local/training")
_SUPPORT_IMPORT = re.compile(r"^\s*(?:from support\.(\w+) import|import support\.(\w+))", re.M)


def involves_airflow(path: Path, support: Path, _seen: set[str] | None = None) -> bool:
    """True when ``path`` (a test file or a support module) or a support module it imports mentions Airflow."""
    text = path.read_text(encoding="utf-8")
    if _AIRFLOW.search(text):
        return True
    seen = set() if _seen is None else _seen
    for match in _SUPPORT_IMPORT.finditer(text):
        name = match.group(1) or match.group(2)
        if name in seen:
            continue
        seen.add(name)
        if name in _RUNS_OTHER_CODE:
            return True
        module = support / f"{name}.py"
        if module.exists() and involves_airflow(module, support, seen):
            return True
    return False


def runs_in(relative: str) -> str:
    """The suite, ``"airflow3"`` or ``"airflow2"``, that runs the Airflow-free test file at ``relative`` (a path
    below tests/, with ``/``)."""
    return "airflow2" if relative.startswith(tuple(f"{folder}/" for folder in IN_THE_2_11_SUITE)) else "airflow3"
