"""Validate a definition once per content: DAG re-parses of an unchanged definition skip pydantic.

Airflow parses every DAG file again and again, each time in a fresh forked process, so checking a
definition at parse time would import pydantic and run every rule in every parse. A definition that
passed is remembered as a small marker file named by a digest of its canonical form, of this
package's version and location and of the interpreter's environment (``sys.prefix``, ``sys.path``).
The marker lists what validation depended on, each with its size and times: this package's
definition code and data (files and folders), botocore's sagemaker model (and the folder of its
versions), pydantic and pydantic-core. A later parse reads the marker and stats those paths, all
unchanged meaning a hit: no pydantic, no botocore, no search for either. Anything changed, the
definition is validated again. Only successes are remembered, so a bad definition fails at every
parse; the task validates again before it submits anything.

The cache folder is ``$AIRFLOW_HETERO_CACHE_DIR``, else ``$XDG_CACHE_HOME/airflow-hetero`` or
``~/.cache/airflow-hetero``; ``AIRFLOW_HETERO_CACHE_DIR=off`` turns the cache off. A folder that
cannot be written only means validating every time. Stdlib only until a definition is new.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import sys
from collections.abc import Mapping
from typing import Any

from airflow_hetero import cache_folder as _folder

__all__ = ["check_at_parse", "definition_key", "dependencies", "has_template", "validate_once"]

_HERE = os.path.dirname(os.path.abspath(__file__))
#: The definition's code folders below it (every module of each is a dependency, as the folder itself).
_CODE_FOLDERS = ("raw_request", "rules", "builder", "facts")
#: First line of every marker; a new layout gets a new header, so an old marker is only a miss.
_HEADER = "airflow-hetero validated definition 2"


def _files(folder: str, suffix: str) -> list[str]:
    try:
        return sorted(e.path for e in os.scandir(folder) if e.name.endswith(suffix))
    except OSError:
        return []


def dependencies() -> list[str] | None:
    """The files and folders a validation result depends on besides the definition itself.

    None when one of them cannot be found (then nothing is remembered). A folder stands for the
    files added to or removed from it: a new module, a new botocore model version.
    """
    import importlib.util

    from airflow_hetero.definition.facts.service_model import InstanceTypeCatalogError, sagemaker_model_path

    data = os.path.join(_HERE, "data")
    folders = [os.path.join(_HERE, name) for name in _CODE_FOLDERS]
    paths = [_HERE, data, *folders, *_files(_HERE, ".py"), *(f for d in folders for f in _files(d, ".py"))]
    paths += _files(data, ".json")
    try:
        model = str(sagemaker_model_path())  # the instance types come from it
    except InstanceTypeCatalogError:
        return None
    paths += [os.path.dirname(os.path.dirname(model)), model]
    for library in ("pydantic", "pydantic_core"):
        spec = importlib.util.find_spec(library)
        if spec is None or not spec.origin:
            return None
        paths += [os.path.dirname(spec.origin), spec.origin]
    return paths


def _stat_entry(path: str) -> str:
    """``size:mtime:ctime:path`` (nanoseconds); any write, replacement or removal changes it."""
    try:
        st = os.stat(path)
    except OSError:
        return f"-:-:-:{path}"
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{path}"


def _canonical(value: Any) -> Any:
    """``value`` with each dict as its items sorted by key, for ``repr``; raises otherwise.

    Only the exact JSON types are accepted (str keys, lists, finite numbers, no tuples, no
    subclasses): anything else could validate differently from a look-alike, so such definitions
    are never cached. ``repr`` then tells 1, 1.0 and True apart, as validation does.
    """
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        if not math.isfinite(value):
            raise ValueError("not a finite number")
        return value
    if kind is list:
        return [_canonical(v) for v in value]
    if kind is dict:
        if not all(type(k) is str for k in value):
            raise TypeError("non-string key")
        return tuple((k, _canonical(value[k])) for k in sorted(value))
    raise TypeError(kind.__name__)


def definition_key(
    data: Mapping[str, Any] | None, *, request: bool = False, fallbacks: Mapping[str, Any] | None = None
) -> str | None:
    """The cache key of a definition (or, ``request``, a CreateTrainingJob request), with the operator's
    ``fallbacks`` when given (``data`` None: those alone); None when uncacheable."""
    text = _canonical_text(data, fallbacks)
    return None if text is None else _key(text, request=request)


def _canonical_text(data: Mapping[str, Any] | None, fallbacks: Mapping[str, Any] | None) -> str | None:
    """What the key digests: the canonical ``repr`` of ``data`` (and ``fallbacks``); None when uncacheable.

    Dicts become tuples in it, so a ``{`` in it comes from a string: Jinja shows as ``{{`` or ``{%``.
    """
    data_text = _canonical_repr(dict(data)) if data is not None else "-"
    fallbacks_text = _canonical_repr(fallbacks) if fallbacks is not None else ""
    return _joined(data_text, fallbacks_text)


def _canonical_repr(value: Any) -> str | None:
    """``repr`` of :func:`_canonical` ``value``; None when it has no canonical form."""
    try:
        return repr(_canonical(value))
    except (TypeError, ValueError):
        return None


def _joined(data_text: str | None, fallbacks_text: str | None) -> str | None:
    """The key's text from its parts (``-``: no data, ``""``: no fallbacks); None when a part is uncacheable."""
    if data_text is None or fallbacks_text is None:
        return None
    return data_text + ("\nfallback_instance_types " + fallbacks_text if fallbacks_text else "")


#: What a key says of where it was made: this release, this code, this environment and its import path (as this
#: module saw it when imported: a process that imported it before its DAG parses, as airflow_local_settings.py
#: may, pays for it once).
def environment() -> str:
    """This release, this code's folder, the Python environment and its import path, as one string."""
    from airflow_hetero import __version__

    return "\0".join([__version__, _HERE, sys.prefix, *sys.path])


_WHERE = environment()


def _key(text: str, *, request: bool) -> str:
    kind = "request" if request else "job"
    return hashlib.blake2b(f"{_WHERE}\0{kind}\n{text}".encode(), digest_size=32).hexdigest()


def _unchanged(marker: str) -> bool:
    """True when ``marker`` exists and every path it lists still has the recorded stat."""
    try:  # os.read: a text-mode open costs a parse more than all the stats below
        fd = os.open(marker, os.O_RDONLY)
        try:
            text = os.read(fd, 1 << 20).decode("utf-8")
        finally:
            os.close(fd)
    except (OSError, ValueError):
        return False
    header, _, body = text.partition("\n")
    if header != _HEADER or not body:
        return False
    return all(_stat_entry(entry.split(":", 3)[-1]) == entry for entry in body.split("\0"))


def _remember(marker: str, entries: list[str]) -> None:
    """Write the marker atomically (a parallel parse reads all of it or nothing)."""
    partial = f"{marker}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(marker), exist_ok=True)
        with open(partial, "w", encoding="utf-8") as file:
            file.write(_HEADER + "\n" + "\0".join(entries))
        os.replace(partial, marker)
    except OSError:  # a read-only home: validate every time
        with contextlib.suppress(OSError):
            os.unlink(partial)


def validate_once(
    data: Mapping[str, Any] | None, *, request: bool = False, fallbacks: Mapping[str, Any] | None = None
) -> None:
    """Raise :class:`~airflow_hetero.definition.errors.JobDefinitionError` for a bad definition.

    ``request``: ``data`` is a CreateTrainingJob request (request mode), checked by
    :func:`~airflow_hetero.definition.raw_request.training_request.load_request`. ``fallbacks``: the
    operator's ``fallback_instance_types``, checked with it (``data`` None: on its own). One already
    validated with unchanged code, data and libraries returns at once, without importing pydantic or botocore.
    """
    folder = _folder()
    key = definition_key(data, request=request, fallbacks=fallbacks) if folder is not None else None
    _validate_cached(data, request=request, fallbacks=fallbacks, folder=folder, key=key)


def _validate_cached(
    data: Mapping[str, Any] | None,
    *,
    request: bool,
    fallbacks: Mapping[str, Any] | None,
    folder: str | None,
    key: str | None,
) -> None:
    """:func:`validate_once` with the cache folder and key already known (None: not cached)."""
    marker = os.path.join(folder, key[:2], key) if folder is not None and key is not None else None
    if marker is not None and _unchanged(marker):
        return
    from airflow_hetero.definition.rules.fallbacks import check_argument
    from airflow_hetero.definition.submittable import load_submittable

    paths = dependencies() if marker is not None else None
    entries = [_stat_entry(p) for p in paths] if paths is not None else None  # stats from before validating
    try:  # raises for a bad definition: nothing is remembered
        if data is None:
            check_argument(fallbacks)
        else:
            load_submittable(data, request=request, fallbacks=fallbacks)
    except Exception:
        if marker is not None:  # a success under other code must not outlive it
            with contextlib.suppress(OSError):
                os.unlink(marker)
        raise
    if marker is not None and entries is not None:
        _remember(marker, entries)


def has_template(value: Any) -> bool:
    """True when any string inside ``value`` holds Jinja (then validation waits for rendering)."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if value is None or isinstance(value, int | float):  # before the Mapping ABC check, which is slow
        return False
    if isinstance(value, list | tuple):
        return any(has_template(v) for v in value)
    if isinstance(value, dict) or isinstance(value, Mapping):  # noqa: SIM101 - a dict skips the ABC check
        return any(has_template(k) or has_template(v) for k, v in value.items())
    return False


def check_at_parse(source: Any, *, request: bool, fallbacks: Any = None) -> Any:
    """An operator's ``job`` or ``request`` as it keeps it: a path as a string, a ``HeteroTrainingJob`` as its
    dict (which renders at any depth); a mapping validated now (at DAG-parse time, through the cache)
    unless it holds Jinja, whose validation waits for rendering.

    ``fallbacks``: the operator's ``fallback_instance_types``, validated with a mapping ``source``, or on
    its own when the source waits (a file, Jinja); unless it holds Jinja itself.
    """
    kept = _as_kept(source)
    mapping = kept if _is_mapping(kept) else None
    # one walk of each: its canonical text is the cache key's and shows Jinja (see _canonical_text)
    data_text = _canonical_repr(dict(mapping)) if mapping is not None else None
    fallbacks_text = _canonical_repr(fallbacks) if fallbacks is not None else None
    plain = mapping if mapping is not None and not _templated(mapping, data_text) else None
    argument = fallbacks if fallbacks is not None and not _templated(fallbacks, fallbacks_text) else None
    if plain is None and argument is None:
        return kept
    folder = _folder()
    text = _joined(data_text if plain is not None else "-", fallbacks_text if argument is not None else "")
    key = _key(text, request=request) if folder is not None and text is not None else None
    _validate_cached(plain, request=request, fallbacks=argument, folder=folder, key=key)
    return kept


def _templated(value: Any, text: str | None) -> bool:
    """:func:`has_template`, read from ``value``'s canonical text when it has one (no second walk)."""
    if text is None:
        return has_template(value)
    return "{{" in text or "{%" in text


def _as_kept(source: Any) -> Any:
    """What the operator keeps of ``source``: None, a path string and a dict as they are (told apart before
    any ABC check: in a freshly forked parse an ABC's first check of a type walks every registered
    subclass, ~0.4 ms), a ``HeteroTrainingJob`` as its dict, a path-like as its string."""
    if source is None or isinstance(source, str | dict):
        return source
    if hasattr(source, "model_dump"):  # a HeteroTrainingJob, without importing pydantic to ask
        return source.model_dump(mode="json", exclude_unset=True)
    if isinstance(source, os.PathLike):
        return os.fspath(source)
    return source


def _is_mapping(value: Any) -> bool:
    """A dict (no ABC check) or another Mapping."""
    return isinstance(value, dict) or (value is not None and not isinstance(value, str) and isinstance(value, Mapping))
