"""Builders of the objects tests send: RayClusters, their groups and pod templates, and
CustomResourceDefinitions. Each world names its own shapes (sizes, selectors) with these."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .objects import Obj

IMAGE = "rayproject/ray:2.60.0"
RAY_VERSION = "2.60.0"
TPU_ACCELERATOR = "cloud.google.com/gke-tpu-accelerator"
TPU_TOPOLOGY = "cloud.google.com/gke-tpu-topology"
#: The nodeSelector of a v6e 4x4 slice (four hosts of four chips), the worlds' usual TPU.
V6E_4X4 = {TPU_ACCELERATOR: "tpu-v6e-slice", TPU_TOPOLOGY: "4x4"}
#: A v5p 2x2x2 slice (two hosts of four chips): the process-runtime worlds' TPU.
V5P_2X2X2 = {TPU_ACCELERATOR: "tpu-v5p-slice", TPU_TOPOLOGY: "2x2x2"}


def container(
    name: str,
    *,
    requests: Mapping[str, str] | None = None,
    limits: Mapping[str, str] | None = None,
    **extra: Any,
) -> Obj:
    """A Ray container; ``resources`` holds what is given, and is absent when nothing is."""
    resources: Obj = {}
    if requests is not None:
        resources["requests"] = dict(requests)
    if limits is not None:
        resources["limits"] = dict(limits)
    out: Obj = {"name": name, "image": IMAGE, **extra}
    if resources:
        out["resources"] = resources
    return out


def template(*containers: Obj, **spec: Any) -> Obj:
    """A pod template: ``spec`` fields (nodeSelector=..., restartPolicy=...) and containers."""
    return {"spec": {**spec, "containers": list(containers)}}


def head_group(head: Obj, params: Mapping[str, str] | None = None) -> Obj:
    return {"rayStartParams": dict(params or {}), "template": template(head)}


def worker_group(
    name: str,
    pod: Obj,
    *,
    replicas: int | None = None,
    min_replicas: int | None = None,
    max_replicas: int | None = None,
    hosts: int | None = None,
    params: Mapping[str, str] | None = None,
    **extra: Any,
) -> Obj:
    """A worker group of ``pod`` (a `template`); the counts are written only when given."""
    group: Obj = {"groupName": name}
    for key, value in (
        ("replicas", replicas),
        ("minReplicas", min_replicas),
        ("maxReplicas", max_replicas),
        ("numOfHosts", hosts),
    ):
        if value is not None:
            group[key] = value
    return {**group, "rayStartParams": dict(params or {}), "template": pod, **extra}


def raycluster(
    name: str, head: Obj, groups: list[Obj], *, namespace: str | None = "default", **spec: Any
) -> Obj:
    """A ray.io/v1 RayCluster; ``spec`` adds fields (enableInTreeAutoscaling=True, ...), and
    a field given as None is left out (rayVersion=None)."""
    metadata = {"name": name} if namespace is None else {"name": name, "namespace": namespace}
    fields = {"rayVersion": RAY_VERSION, "headGroupSpec": head, "workerGroupSpecs": groups, **spec}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": metadata,
        "spec": {key: value for key, value in fields.items() if value is not None},
    }


#: A schema that keeps whatever it is given (no pruning, no validation).
ANY_OBJECT: Obj = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


#: The subresources most test CRDs have: ``/status``.
STATUS: Obj = {"status": {}}


def crd(
    plural: str,
    kind: str,
    *,
    group: str = "example.com",
    scope: str = "Namespaced",
    schema: Obj | None = None,
    subresources: Obj | None = STATUS,
    **names: Any,
) -> Obj:
    """A CustomResourceDefinition with one served, stored version ``v1`` (its ``schema``
    keeps anything unless given); ``names`` adds to spec.names (singular is the lowercased
    kind unless given)."""
    version: Obj = {"name": "v1", "served": True, "storage": True}
    if subresources is not None:
        version["subresources"] = subresources
    version["schema"] = {"openAPIV3Schema": schema or ANY_OBJECT}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind, **names},
            "versions": [version],
        },
    }
