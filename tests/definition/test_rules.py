"""Every rule of the definitions, with a bad definition and its exact message(s)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import definitions_doc as doc

DATA = doc.load()
VALUES = doc.placeholders()


def test_base_definition_is_valid() -> None:
    assert doc.problems_of(DATA["base"]) == []


@pytest.mark.parametrize("example", DATA["examples"], ids=[e["rule"] for e in DATA["examples"]])
def test_rule_reports_exactly_its_problems(example: dict[str, Any]) -> None:
    definition = doc.apply(DATA["base"], example, VALUES)
    assert doc.problems_of(definition) == doc.expected(example, VALUES)


def test_definitions_page_is_generated_from_the_code() -> None:
    assert doc.PAGE.read_text(encoding="utf-8") == doc.render(), "run: python tools/definitions_doc.py"
