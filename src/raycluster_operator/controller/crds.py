"""The CRDs the operator installs, whole (docs/design.md §4, "Lifecycle features").

``api/crd.py``, ``api/rayjob_crd.py`` and ``api/rayservice_crd.py`` hold the schemas; the
``workerGroups`` entries of a RayCluster's status (embedded in a RayJob's and a RayService's)
also carry the fields the lifecycle features write, which each feature declares with its
schema (``Feature.fields``). This module joins the two, reading ``lifecycle.FEATURES`` when
asked, so a feature plugged in later gets its fields in every CRD.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from raycluster_operator.api import crd, rayjob_crd, rayservice_crd
from raycluster_operator.planning.lifecycle import FEATURE_TYPES


def group_fields() -> dict[str, Mapping[str, Any]]:
    """The ``workerGroups`` fields of every feature, in rule order (the first declaration of
    a name holds)."""
    out: dict[str, Mapping[str, Any]] = {}
    for feature in FEATURE_TYPES:
        for name, schema in feature.fields.items():
            out.setdefault(name, schema)
    return out


def crd_manifest() -> dict[str, Any]:
    """The rayclusters.ray.io CRD (a fresh dict each call)."""
    return crd.crd_manifest(group_fields())


def rayjob_crd_manifest() -> dict[str, Any]:
    """The rayjobs.ray.io CRD (a fresh dict each call)."""
    return rayjob_crd.rayjob_crd_manifest(group_fields())


def rayservice_crd_manifest() -> dict[str, Any]:
    """The rayservices.ray.io CRD (a fresh dict each call)."""
    return rayservice_crd.rayservice_crd_manifest(group_fields())
