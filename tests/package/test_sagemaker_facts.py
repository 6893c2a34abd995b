"""SageMaker's constants are stated once; the copies that cannot import them are pinned equal here.

``runtime`` ships alone into training containers and the host-name resolver runs inside host
processes, so neither imports :mod:`airflow_hetero.sagemaker_facts`. That it imports only the standard
library is an import-linter contract (pyproject.toml).
"""

from __future__ import annotations

from pathlib import Path

from airflow_hetero import runtime, sagemaker_facts
from airflow_hetero.local.host import resolver

ROOT = Path(__file__).resolve().parents[2]


def test_the_host_resolver_copy_of_the_address_variable_is_the_fact() -> None:
    assert resolver.ADDRESSES_ENV == sagemaker_facts.HOST_ADDRESSES_ENV


def test_runtime_copies_are_the_facts() -> None:
    assert runtime.HOST_ADDRESSES_ENV == sagemaker_facts.HOST_ADDRESSES_ENV
    assert runtime.DISTRIBUTION_GROUPS_HP == sagemaker_facts.DISTRIBUTION_GROUPS_HP
    assert tuple(runtime.DISTRIBUTION_FLAGS) == sagemaker_facts.DISTRIBUTION_FLAGS
    assert runtime.DEFAULT_CHECKPOINT_LOCAL_PATH == sagemaker_facts.DEFAULT_CHECKPOINT_LOCAL_PATH
    assert runtime.DEFAULT_BASE_DIR == sagemaker_facts.CONTAINER_BASE_DIR


def test_no_part_spells_the_default_max_runtime_itself() -> None:
    """86400 is written once, in sagemaker_facts (runtime has no use for it)."""
    spelled = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "airflow_hetero").rglob("*.py")
        if "86400" in path.read_text() and path.name != "sagemaker_facts.py"
    ]
    assert spelled == []


def test_no_part_spells_the_price_list_currency_itself() -> None:
    """"USD", the Price List's currency, is written once: PRICE_LIST_CURRENCY in pricing/settings.py."""
    spelled = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "airflow_hetero").rglob("*.py")
        if ('"USD"' in path.read_text() or "'USD'" in path.read_text().replace("such as 'USD' or 'EUR'", ""))
        and path.name != "settings.py"
    ]
    assert spelled == []
