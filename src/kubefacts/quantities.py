"""Kubernetes resource quantities (``500m``, ``16Gi``, ``4``) read as exact numbers.

The operator sizes ``ray start`` from container limits and the dev cluster's scheduler compares
requests with node capacity; exact fractions keep rounding from deciding either (``0.1 + 0.2``),
and one parser keeps the two from disagreeing about what a quantity means.
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction

_SUFFIXES: dict[str, Fraction] = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
_QUANTITY = re.compile(
    r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?)$"
)


def parse_quantity(value: object) -> Fraction:
    """The exact value of a quantity; raises ``ValueError`` for anything Kubernetes rejects."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    if not isinstance(value, str):
        raise ValueError(f"not a quantity: {value!r}")
    return _parse_text(value)


@functools.lru_cache(maxsize=4096)
def _parse_text(value: str) -> Fraction:
    """Cached: a plan reads the same few quantity strings of a template for every pod, and a
    Fraction is immutable, so sharing one is safe (a ValueError is simply raised again)."""
    match = _QUANTITY.match(value.strip())
    if not match:
        raise ValueError(f"not a quantity: {value!r}")
    number, exponent, suffix = match.groups()
    amount = Fraction(number)
    if exponent:
        return amount * Fraction(10) ** int(exponent[1:])
    return amount * _SUFFIXES[suffix or ""]


#: apimachinery's quantity errors (``resource.ParseQuantity``), as a decode failure shows them.
FORMAT_WRONG = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
SUFFIX_WRONG = "unable to parse quantity's suffix"
_GO_SHAPE = re.compile(r"^[+-]?[0-9]*(?:\.[0-9]*)?([eEinumkKMGTP]*[-+]?[0-9]*)$")
_EXPONENT = re.compile(r"^[eE][+-]?[0-9]+$")


@functools.lru_cache(maxsize=1024)
def go_parse_error(text: str) -> str | None:
    """Why Go's ``ParseQuantity`` refuses ``text`` (after its TrimSpace), or None: the shape
    its scanner accepts, then a suffix it knows (a decimal or binary one, or an exponent)."""
    text = text.strip()
    if not text:
        return FORMAT_WRONG
    match = _GO_SHAPE.match(text)
    if match is None:
        return FORMAT_WRONG
    suffix = match.group(1)
    if suffix in _SUFFIXES or _EXPONENT.match(suffix):
        return None
    return SUFFIX_WRONG
