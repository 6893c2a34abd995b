"""Whole OpenLineage events checked against OpenLineage's own JSON schemas, offline.

The schemas are vendored in tests/data/openlineage (its README says from where); the package's custom facets
validate against the schemas it ships (``airflow_hetero/lineage/schemas``), whose ``$id`` is a pypi.org address
that serves nothing. A :class:`referencing.Registry` maps each ``$id`` to its file and retrieves nothing else: a
facet whose ``_schemaURL`` names a schema not vendored is a problem, never a download.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

import airflow_hetero.lineage

VENDORED = Path(__file__).resolve().parents[1] / "data" / "openlineage"
#: The package's own facet schemas, where the package is installed (the wheel, in the system test).
PACKAGED = Path(airflow_hetero.lineage.__file__).parent / "schemas"
#: How much of a failing value a problem quotes.
QUOTE = 200


def schema_files() -> list[Path]:
    """OpenLineage's spec, the facets vendored beside it, and the package's own facet schemas."""
    return [
        VENDORED / "OpenLineage.json",
        *sorted((VENDORED / "facets").glob("*.json")),
        *sorted(PACKAGED.glob("*.json")),
    ]


@functools.cache
def registry() -> Registry[Any]:
    """Every schema of :func:`schema_files` under its ``$id``; nothing is retrieved."""
    resources = []
    for path in schema_files():
        contents = json.loads(path.read_text(encoding="utf-8"))
        resources.append((contents["$id"], Resource.from_contents(contents, default_specification=DRAFT202012)))
    return Registry().with_resources(resources)


def facets_of(event: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """(where, facet) for every facet of a RunEvent: the run's, the job's, each dataset's."""
    for part in ("run", "job"):
        for name, facet in ((event.get(part) or {}).get("facets") or {}).items():
            yield f"{part}.facets.{name}", facet
    for side, own in (("inputs", "inputFacets"), ("outputs", "outputFacets")):
        for index, dataset in enumerate(event.get(side) or []):
            for kind in ("facets", own):
                for name, facet in (dataset.get(kind) or {}).items():
                    yield f"{side}[{index}].{kind}.{name}", facet


def problems_against(url: str, instance: Any, where: str) -> list[str]:
    """What is wrong with ``instance`` by the schema at ``url`` (an ``$id`` with its fragment)."""
    if url.partition("#")[0] not in registry():
        return [f"{where}: no schema vendored for {url} (add it to tests/data/openlineage, see its README)"]
    validator = jsonschema.Draft202012Validator(
        {"$ref": url}, registry=registry(), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    found = []
    for error in sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path)):
        found.append(f"{where}{error.json_path.removeprefix('$')}: {error.message[:QUOTE]} (by {url})")
    return found


def event_problems(event: Mapping[str, Any]) -> list[str]:
    """Every way ``event`` (a RunEvent as JSON) breaks its schema (``schemaURL``) or a facet's (``_schemaURL``)."""
    url = event.get("schemaURL")
    if not isinstance(url, str):
        return ["event: no schemaURL"]
    found = problems_against(url, event, "event")
    for where, facet in facets_of(event):
        facet_url = facet.get("_schemaURL") if isinstance(facet, Mapping) else None
        if not isinstance(facet_url, str):
            found.append(f"{where}: no _schemaURL")
            continue
        found += problems_against(facet_url, facet, where)
    return found
