"""Amounts of money as every part stores and prints them: one rounding and one text form (stdlib only).

A cost, a waiting cost, a saving, a what-if's change per hour or per run, a budget's figures: the summary
stores each rounded by :func:`round_amount` (4 decimals, yet an amount below 0.001 keeps two significant
digits instead of one or none), and the task log, the CLI, the Instance groups view and the Runs view print
each with :func:`format_amount`, so that a non-zero amount never reads as ``0`` or ``-0`` (a data group of a
few instance-seconds at 0.05 USD/h costs some 0.00007 USD). The bottom floor of the package: every part
reads it, it reads nothing.
"""

from __future__ import annotations

import math

__all__ = ["DECIMALS", "SIGNIFICANT", "SMALL", "TINY", "format_amount", "round_amount"]

#: Decimals an amount is stored with (below :data:`TINY`, two significant digits instead).
DECIMALS = 4
#: The smallest amount the stored decimals hold: a stored ``0`` known to be non-zero reads ``< 0.0001``.
TINY = 10.0**-DECIMALS


#: Below this, :data:`DECIMALS` decimals would keep fewer than two significant digits.
SMALL = 10 * TINY


def round_amount(value: float) -> float:
    """``value`` rounded to :data:`DECIMALS` decimals; an amount below :data:`SMALL` keeps two significant
    digits instead (``0.000139`` rather than ``0.0001``: runs of tiny jobs compared by cost would otherwise
    differ by whole multiples), and a zero is never ``-0.0``."""
    rounded = float(f"{value:.2g}") if abs(value) < SMALL else round(value, DECIMALS)
    return rounded + 0.0  # -0.0 + 0.0 is 0.0


#: Significant digits an amount below 1 is printed with (from 1: its :data:`DECIMALS`).
SIGNIFICANT = 4


def _digits(magnitude: float) -> int:
    """Decimals that print ``magnitude``: :data:`DECIMALS` from 1 up, :data:`SIGNIFICANT` digits below."""
    if magnitude >= 1:
        return DECIMALS
    return min(SIGNIFICANT - 1 - math.floor(math.log10(magnitude)), 20)


def format_amount(value: float | None, *, signed: bool = False, known_nonzero: bool = False) -> str:
    """``value`` as every place prints an amount, never in exponent form and trailing zeros dropped: ``unknown``
    for None; ``0`` for zero; from 1 up the decimals it is stored with (``1.224``, ``237.5939``), below 1 four
    significant digits (``0.005709``, ``0.000014``). ``signed``: a change, with its sign (``+7.344``,
    ``-0.000021``).
    A stored 0 that cannot be zero (``known_nonzero``: instance time at a positive price; or ``-0.0``, what
    an older release's rounding left of a small negative change) reads ``< 0.0001`` (``-< 0.0001``)."""
    if value is None:
        return "unknown"
    number = float(value)
    negative = math.copysign(1.0, number) < 0
    sign = "-" if negative else "+" if signed else ""
    magnitude = abs(number)
    if magnitude == 0:
        return f"{sign}< {TINY:.{DECIMALS}f}" if known_nonzero or negative else "0"
    return sign + f"{magnitude:.{_digits(magnitude)}f}".rstrip("0").rstrip(".")
