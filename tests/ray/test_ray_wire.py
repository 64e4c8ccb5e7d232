"""The requests Ray's clients make in the sidecar our head pod runs, and the rights they need."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from raycluster_operator.api.validation import parse_cluster
from raycluster_operator.builders import build_autoscaler_rbac, build_head_pod

NODE_PROVIDER = "ray.autoscaler._private.kuberay.node_provider"
CLOUD_PROVIDER = "ray.autoscaler.v2.instance_manager.cloud_providers.kuberay.cloud_provider"


def _sidecar_env(world: Any, ns: str, name: str) -> dict[str, Any]:
    cluster, problems = parse_cluster(world.get_cluster(ns, name))
    assert cluster is not None, problems
    pod = build_head_pod(cluster)
    sidecar = next(c for c in pod["spec"]["containers"] if c["name"] == "autoscaler")
    return {e["name"]: e for e in sidecar.get("env", [])}


def test_listing_at_the_head_pods_resource_version(
    world: Any, ns: str, kit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Our sidecar sets RAY_HEAD_POD_NAME, which makes Ray list pods with
    `resourceVersion=<head's>&resourceVersionMatch=NotOlderThan`."""
    world.create_cluster(ns, kit.raycluster("rv", kit.cpu_group(replicas=2)))
    env = _sidecar_env(world, ns, "rv")
    assert env["RAY_HEAD_POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["KUBERAY_CRD_VER"]["value"] == "v1"
    head = world.wait("the head pod", lambda: world.live_names(ns, "rv", "headgroup"))
    workers = world.wait_workers(ns, "rv", "cpu", 2)

    # Ray reads the variable at import; set the module globals it was read into.
    monkeypatch.setattr(importlib.import_module(NODE_PROVIDER), "RAY_HEAD_POD_NAME", min(head))
    monkeypatch.setattr(importlib.import_module(CLOUD_PROVIDER), "RAY_HEAD_POD_NAME", min(head))

    v2 = world.v2_provider(ns, "rv")
    assert set(v2.get_non_terminated()) == head | workers
    v1 = world.v1_provider(ns, "rv")
    assert set(v1.non_terminated_nodes({})) == head | workers


def _allowed(rules: list[dict[str, Any]], group: str, resource: str, verb: str) -> bool:
    return any(
        group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules
    )


def test_autoscaler_role_covers_what_ray_scales_with(world: Any, ns: str, kit: Any) -> None:
    obj = world.create_cluster(ns, kit.raycluster("rbac", kit.cpu_group()))
    cluster, problems = parse_cluster(obj)
    assert cluster is not None, problems
    role = next(o for o in build_autoscaler_rbac(cluster) if o["kind"] == "Role")

    needed = [
        ("", "pods", "get"),  # the head pod's resourceVersion
        ("", "pods", "list"),
        ("ray.io", "rayclusters", "get"),
        ("ray.io", "rayclusters", "patch"),  # replicas, workersToDelete
        ("", "pods", "patch"),  # in-place resize (ray.io/ippr) annotations
    ]
    missing = [n for n in needed if not _allowed(role["rules"], *n)]
    assert missing == []
