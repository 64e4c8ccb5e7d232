"""Container resources read as exact quantities (the parser itself is ``kubefacts``)."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from kubefacts.quantities import parse_quantity

__all__ = ["container_limit_or_request", "container_quantity", "parse_quantity"]


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
