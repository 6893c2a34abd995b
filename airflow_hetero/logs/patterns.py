"""What to look for in each log line: error and warning patterns, and the job's metric definitions (pure).

The defaults find Python tracebacks, log-level errors, CUDA/NCCL failures and out-of-memory kills;
users may pass their own. :class:`LineRules` compiles them once per summary, and says whether a
whole page may be scanned at once (:mod:`airflow_hetero.logs.pagescan`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_hetero.logs.pagescan import page_scannable
from airflow_hetero.runtime import MARKER_PREFIX

__all__ = [
    "DEFAULT_ERROR_PATTERNS",
    "DEFAULT_WARNING_PATTERNS",
    "ENV_LINE",
    "ENV_PREFIX",
    "EVIDENCE_LITERALS",
    "RESOURCE_CONFIG_KEY",
    "AnyPattern",
    "LineRules",
    "compile_patterns",
    "metric_goal",
]

#: Default error patterns: Python tracebacks, log-level ERROR/CRITICAL/FATAL, CUDA and NCCL
#: failures, out-of-memory kills (kernel "Out of memory: Killed process", a shell's "Killed" line or
#: "<pid> Killed", mpirun's "(Killed)", Kubernetes-style OOMKilled, Python MemoryError), the
#: toolkit's ExecuteUserScriptError / ExitCode 137 and segmentation faults. Level words must stand
#: alone (``ERROR:``, ``ERROR ``, ``[ERROR]``), so ``--NCCL_DEBUG WARN"`` or a metric called
#: ``train:error`` do not count. Each pattern starts with an upper-case literal: the regex engine
#: then skips ahead quickly to the few places worth a try, which keeps the per-line cost low (about
#: 0.2 us here). NCCL's ``ncclInternalError`` & co. are therefore found from their ``Error`` and
#: checked backwards: starting at every lower-case "n" of a page cost a quarter of the scan.
DEFAULT_ERROR_PATTERNS: tuple[str, ...] = (
    r"Traceback \(most recent call last\)",
    r"ERROR(?<![\w-]ERROR)(?=[\s:\]]|$)",
    r"CRITICAL(?<![\w-]CRITICAL)(?=[\s:\]]|$)",
    r"FATAL(?<![\w-]FATAL)(?=[\s:\]]|$)",
    r"CUDA error",
    r"CUDA out of memory",
    r"CUBLAS_STATUS_(?!SUCCESS)\w+",
    r"CUDNN_STATUS_(?!SUCCESS)\w+",
    r"NCCL (?:error|Error|ERROR)",
    r"NCCL_\w+ failed",
    r"Error(?:(?<=ncclInternalError)|(?<=nccl(?:System|Remote)Error)|(?<=ncclUnhandledCudaError)"
    r"|(?<=ncclInvalidUsageError)|(?<=ncclInvalidArgumentError))",
    r"Out of memory",
    r"OOMKilled",
    r"Killed process \d+",
    r"Killed(?<=^Killed)\s*$",
    r"Killed(?<=\d Killed)",
    r"Killed(?<=\(Killed)",
    r"MemoryError",
    r"ExecuteUserScriptError",
    r"ExitCode 137\b",
    r"Segmentation fault",
)
#: Default warning patterns: log-level WARN/WARNING standing alone and Python ``...Warning:`` lines.
DEFAULT_WARNING_PATTERNS: tuple[str, ...] = (
    r"WARN(?<![\w-]WARN)(?:ING)?(?=[\s:\]]|$)",
    r"Warning: (?<=[a-z]Warning: )",
)


#: Lines starting with this are the toolkit's environment dump (evidence of the host's group).
ENV_PREFIX = "SM_"
#: A line of an environment dump, ``NAME=value`` with an upper-case name: the toolkit prints its
#: ``SM_*`` variables, SDK v3's drivers the whole container environment (``NCCL_DEBUG=WARN``,
#: ``LOG_LEVEL=ERROR``). Such a line is configuration, never an error or a warning.
ENV_LINE = re.compile(r"[A-Z_][A-Z0-9_]*=")
#: A member only ``resourceconfig.json`` (and dumps of it) has: SDK v3's ``sm_train.sh`` prints the
#: file as one line, at every log level, so it names the host's group where nothing else does.
RESOURCE_CONFIG_KEY = '"current_group_name"'
#: Text whose lines may carry evidence of the host's group: the environment dump, the runtime
#: marker, a printed ``resourceconfig.json``.
EVIDENCE_LITERALS: tuple[str, ...] = (ENV_PREFIX, MARKER_PREFIX, RESOURCE_CONFIG_KEY)
_PLAIN_FLAGS = re.compile("", re.MULTILINE).flags
#: What may be a numbered back-reference or a group condition (an escaped backslash before a
#: digit too: a false alarm only costs the joining).
_BACK_REFERENCE = re.compile(r"\\[1-9]|\(\?\(")


class AnyPattern:
    """Matches a line when any of several regexes does (for patterns that cannot share one regex)."""

    def __init__(self, patterns: list[re.Pattern[str]]) -> None:
        self.patterns = patterns

    def search(self, line: str) -> bool:
        """True when one of the patterns is found in ``line``."""
        return any(p.search(line) for p in self.patterns)


def compile_patterns(patterns: Iterable[str]) -> re.Pattern[str] | AnyPattern | None:
    """One matcher for any of ``patterns`` (None when there are none). Bad regexes raise ValueError.

    The patterns are joined into one top-level alternation, so the engine can skip quickly to
    the first characters they start with. Patterns whose meaning joining could change are
    searched one by one: a global inline flag such as ``(?i)`` would apply to every part, and
    capturing groups would be renumbered under back-references.
    """
    items = [p for p in patterns if p]
    if not items:
        return None
    compiled = []
    for p in items:
        try:
            compiled.append(re.compile(p, re.MULTILINE))
        except re.error as exc:
            raise ValueError(f"invalid pattern {p!r}: {exc}") from None
    if len(compiled) == 1:
        return compiled[0]
    grouped = [c.pattern for c in compiled if c.groups]
    # joined, the first pattern with groups keeps their numbers; a later one's back-references
    # would point at another pattern's groups
    if any(c.flags != _PLAIN_FLAGS for c in compiled) or any(_BACK_REFERENCE.search(p) for p in grouped[1:]):
        return AnyPattern(compiled)
    try:
        return re.compile("|".join(items), re.MULTILINE)
    except re.error:
        return AnyPattern(compiled)


def metric_goal(name: str) -> str:
    """``"min"`` for metrics whose name contains "loss" or "error" (case-insensitive), else ``"max"``."""
    lowered = name.lower()
    return "min" if "loss" in lowered or "error" in lowered else "max"


@dataclass
class LineRules:
    """What to look for in each line: error/warning regexes and the job's MetricDefinitions."""

    errors: re.Pattern[str] | AnyPattern | None
    warnings: re.Pattern[str] | AnyPattern | None
    metrics: list[tuple[str, re.Pattern[str], str]]
    #: The same regexes for scanning a whole page at once (:mod:`~airflow_hetero.logs.pagescan`);
    #: None when one of them could match differently there, and pages go line by line.
    page_patterns: list[re.Pattern[str]] | None = None
    #: The :data:`EVIDENCE_LITERALS` a page scan looks for with ``str.find`` (empty when
    #: ``page_patterns`` finds them already).
    page_literals: tuple[str, ...] = EVIDENCE_LITERALS

    @classmethod
    def build(
        cls,
        error_patterns: Iterable[str] | None = None,
        warning_patterns: Iterable[str] | None = None,
        metric_definitions: Iterable[Mapping[str, Any]] | None = None,
    ) -> LineRules:
        """Compile the patterns; ``None`` means the defaults, an empty list means "none"."""
        metrics: list[tuple[str, re.Pattern[str], str]] = []
        errors = DEFAULT_ERROR_PATTERNS if error_patterns is None else tuple(error_patterns)
        warnings = DEFAULT_WARNING_PATTERNS if warning_patterns is None else tuple(warning_patterns)
        for item in metric_definitions or ():
            name, regex = str(item.get("Name", "")), str(item.get("Regex", ""))
            if not name or not regex:
                raise ValueError(f"metric definition needs Name and Regex: {dict(item)!r}")
            try:
                metrics.append((name, re.compile(regex), metric_goal(name)))
            except re.error as exc:
                raise ValueError(f"invalid regex for metric {name!r}: {exc}") from None
        rules = cls(errors=compile_patterns(errors), warnings=compile_patterns(warnings), metrics=metrics)
        reviewed = DEFAULT_ERROR_PATTERNS + DEFAULT_WARNING_PATTERNS
        sources = [p for p in errors + warnings if p] + [regex.pattern for _, regex, _ in metrics]
        joined = [m for m in (rules.errors, rules.warnings) if m is not None]
        if all(isinstance(m, re.Pattern) for m in joined) and all(
            page_scannable(source, reviewed=reviewed) for source in sources
        ):
            # per line, ^ and $ are the line's ends; in a joined page only with MULTILINE
            page = [m for m in joined if isinstance(m, re.Pattern)]
            combined = _one_page_pattern(page)
            if combined is not None:
                page, rules.page_literals = [combined], ()
            rules.page_patterns = page + [
                re.compile(regex.pattern, regex.flags | re.MULTILINE) for _, regex, _ in metrics
            ]
        return rules


def _one_page_pattern(patterns: list[re.Pattern[str]]) -> re.Pattern[str] | None:
    """Errors, warnings and the evidence literals as one alternation: one pass over a page instead
    of one per rule. The page scan only needs every line one of them points at, and a leftmost
    match of the alternation is at or before each alternative's own; None (separate passes) when
    joining could change what a part matches: capturing groups (back-references would be
    renumbered) or global inline flags (they would apply to every part)."""
    if any(p.groups or p.flags != _PLAIN_FLAGS for p in patterns):
        return None
    try:
        combined = re.compile(
            "|".join([p.pattern for p in patterns] + [re.escape(literal) for literal in EVIDENCE_LITERALS]),
            re.MULTILINE,
        )
    except re.error:
        return None
    return combined if combined.flags == _PLAIN_FLAGS else None
