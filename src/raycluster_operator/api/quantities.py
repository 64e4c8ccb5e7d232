"""Kubernetes resource quantities (``500m``, ``16Gi``, ``4``) read as exact numbers.

The ray start flags (num-cpus, memory, num-gpus, TPU) and the TPU validator read container
limits; exact fractions avoid float surprises such as ``0.1 + 0.2`` when a quantity is summed.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

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


def container_quantity(container: Mapping[str, Any], resource: str, *, kind: str) -> Fraction:
    """``container.resources.<kind>[resource]`` or 0 when absent or unreadable."""
    resources = container.get("resources")
    if not isinstance(resources, Mapping):
        return Fraction(0)
    section = resources.get(kind)
    if not isinstance(section, Mapping) or resource not in section:
        return Fraction(0)
    try:
        return parse_quantity(section[resource])
    except ValueError:
        return Fraction(0)


def container_limit_or_request(container: Mapping[str, Any], resource: str) -> Fraction:
    """The limit, or the request when no limit is set (how KubeRay sizes ``ray start``)."""
    limit = container_quantity(container, resource, kind="limits")
    return limit if limit else container_quantity(container, resource, kind="requests")
