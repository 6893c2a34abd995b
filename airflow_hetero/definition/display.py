"""Show untrusted names safely in messages, and notice names that only look like known ones (pure).

A definition may carry control characters (a terminal escape in a channel name) or look-alike
letters (a Cyrillic small o, U+043E, in ``dnn_group``). Messages escape both, so what is printed is what is in
the file, and say when a name differs from a known one only by confusable characters.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

# Letters that render like ASCII ones in common fonts (Cyrillic, Greek, Latin variants), written
# as escapes so the source itself shows no look-alikes; NFKC handles fullwidth and compatibility
# forms before this table applies.
_LOOKALIKE_GROUPS = {
    "\u0430\u0251\u03b1": "a",
    "\u0410\u0391": "A",
    "\u0412\u0392": "B",
    "\u0441\u03f2": "c",
    "\u0421\u03f9": "C",
    "\u0501": "d",
    "\u0435\u0454": "e",
    "\u0415\u0395": "E",
    "\u04bb": "h",
    "\u041d\u0397": "H",
    "\u0456\u03b9\u0269": "i",
    "\u0406\u0399\u04c0": "I",
    "\u0458": "j",
    "\u0408": "J",
    "\u03ba": "k",
    "\u041a\u039a": "K",
    "\u04cf": "l",
    "\u041c\u039c": "M",
    "\u039d": "N",
    "\u043e\u03bf\u03c3": "o",
    "\u041e\u039f": "O",
    "\u0440\u03c1": "p",
    "\u0420\u03a1": "P",
    "\u051b": "q",
    "\u0455": "s",
    "\u0405": "S",
    "\u0422\u03a4": "T",
    "\u03c5": "u",
    "\u03bd": "v",
    "\u051d": "w",
    "\u0445\u03c7": "x",
    "\u0425\u03a7": "X",
    "\u0443\u03b3": "y",
    "\u03a5\u04ae": "Y",
    "\u0396": "Z",
}
_LOOKALIKES = str.maketrans({char: ascii_ for chars, ascii_ in _LOOKALIKE_GROUPS.items() for char in chars})


def escape(text: str) -> str:
    """``text`` with control and non-ASCII characters as ``\\x1b`` / ``\\u043e`` escapes (ASCII out)."""
    if text.isascii() and text.isprintable():
        return text
    out = []
    for char in text:
        code = ord(char)
        if 32 <= code < 127:
            out.append(char)
        elif code < 256:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return "".join(out)


def skeleton(name: str) -> str:
    """What ``name`` looks like: compatibility forms folded, look-alike letters made ASCII."""
    return unicodedata.normalize("NFKC", name).translate(_LOOKALIKES)


def confusable_hint(name: str, known: Iterable[str]) -> str:
    """``"; 'dnn_gr\\u043eup' differs from 'dnn_group' only by look-alike characters (...)"`` or ``""``."""
    shape = skeleton(name)
    for other in known:
        if other != name and skeleton(other) == shape:
            odd = sorted({c for c in name if not c.isascii()} | {c for c in other if not c.isascii()})
            names = ", ".join(f"{escape(c)} {unicodedata.name(c, 'UNKNOWN')}" for c in odd)
            return f"; '{escape(name)}' differs from '{escape(other)}' only by look-alike characters ({names})"
    return ""
