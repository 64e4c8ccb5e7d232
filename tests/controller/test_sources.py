"""Sources: which RayCluster a change concerns, and what it proves about earlier writes."""

from __future__ import annotations

from typing import Any

import pytest
from fake_kube import FakeKube

from raycluster_operator.controller.manager import ManagerOptions
from raycluster_operator.controller.raycluster.sources import Change, SourceOptions, Sources

OURS = "raycluster-operator"


def sources(*namespaces: str) -> tuple[Sources, list[Change]]:
    seen: list[Change] = []
    src = Sources(FakeKube(), SourceOptions(namespaces=namespaces))  # type: ignore[arg-type]
    src.subscribe(seen.append)
    return src, seen


def obj(name: str, *, labels: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "resourceVersion": "1",
            "labels": labels or {},
        }
        | meta
    }


def test_a_pod_change_names_the_cluster_of_its_label() -> None:
    src, seen = sources()
    src.pods[0].apply("ADDED", obj("p", labels={"ray.io/cluster": "c"}))
    src.pods[0].apply("DELETED", obj("p", labels={"ray.io/cluster": "c"}))
    assert seen == [Change("ns/c", "Pod", "p", False), Change("ns/c", "Pod", "p", True)]


def test_a_terminating_pod_counts_as_gone() -> None:
    src, seen = sources()
    src.pods[0].apply("ADDED", obj("p", labels={"ray.io/cluster": "c"}, deletionTimestamp="t"))
    assert seen == [Change("ns/c", "Pod", "p", True)]


def test_a_relabelled_pod_concerns_both_clusters_but_proves_only_for_the_new_one() -> None:
    src, seen = sources()
    src.pods[0].apply("ADDED", obj("p", labels={"ray.io/cluster": "a"}))
    seen.clear()
    moved = obj("p", labels={"ray.io/cluster": "b"})
    moved["metadata"]["resourceVersion"] = "2"
    src.pods[0].apply("MODIFIED", moved)
    assert seen == [
        Change("ns/a", "Pod", "p", False, observed=False),
        Change("ns/b", "Pod", "p", False),
    ]


def test_a_service_names_its_owning_cluster_and_an_unowned_one_nothing() -> None:
    src, seen = sources()
    owned = obj("c-head-svc", ownerReferences=[{"kind": "RayCluster", "name": "c"}])
    src.services[0].apply("ADDED", owned)
    src.services[0].apply("ADDED", obj("kube-dns"))
    assert seen == [Change("ns/c", "Service", "c-head-svc", False)]
    assert [s["metadata"]["name"] for s in src.caches.services.by_index("namespace", "ns")] == [
        "c-head-svc",
        "kube-dns",
    ]


def test_the_autoscalers_rbac_objects_name_their_cluster_by_label() -> None:
    src, seen = sources()
    for infs in src.rbac.values():
        infs[0].apply("DELETED", obj("c", labels={"ray.io/cluster": "c"}))
    assert {(c.kind, c.gone) for c in seen} == {
        ("ServiceAccount", True),
        ("Role", True),
        ("RoleBinding", True),
    }


def test_a_cluster_is_its_own_key_and_every_namespace_gets_its_informers() -> None:
    src, seen = sources("a", "b")
    assert {i.namespace for i in src.informers} == {"a", "b"}
    assert len(src.informers) == 2 * 8  # ResourceQuotas and LimitRanges too (rule 13c)
    src.clusters[1].apply("ADDED", {"metadata": {"name": "c", "namespace": "b"}})
    assert seen == [Change("b/c", "RayCluster", "c", False)]


def test_flat_option_names_land_in_their_sections() -> None:
    options = ManagerOptions.from_flat(
        namespaces=("x",), resync_period=5.0, leader_elect=False, random_pod_delete=True
    )
    assert options.sources.namespaces == ("x",)
    assert options.controller.resync_period == 5.0
    assert options.serving.leader_elect is False
    assert options.planning.random_pod_delete is True
    assert (
        options.controller.reconcile_concurrency
        == ManagerOptions().controller.reconcile_concurrency
    )


def test_an_unknown_option_name_is_refused() -> None:
    with pytest.raises(TypeError, match="resync"):
        ManagerOptions.from_flat(resync=5.0)


def test_a_users_budget_concerns_every_cluster_of_its_namespace_when_it_selects_anew() -> None:
    """A user's PodDisruptionBudget may select any cluster's pods (planning/budget_overlap.py);
    the disruption controller's status writes, which the cache drops, concern nobody."""
    seen: list[Change] = []
    src = Sources(FakeKube(), SourceOptions(), watch_nodes=True)  # type: ignore[arg-type]
    src.subscribe(seen.append)
    for name in ("a", "b"):
        src.clusters[0].apply("ADDED", obj(name))
    seen.clear()
    selector = {"matchLabels": {"team": "x"}}
    budget = obj("team") | {"spec": {"minAvailable": 1, "selector": selector}}
    src.budgets[0].apply("ADDED", budget)
    assert [c.key for c in seen] == ["ns/a", "ns/b"]
    seen.clear()
    src.budgets[0].apply("MODIFIED", budget | {"status": {"currentHealthy": 3}})
    assert seen == []
    (cached,) = src.caches.budgets.by_index("namespace", "ns")  # type: ignore[union-attr]
    assert cached["spec"] == {"selector": selector}
    ours = obj("c-s", labels={"ray.io/cluster": "c", "app.kubernetes.io/created-by": OURS})
    src.budgets[0].apply("ADDED", ours)
    assert [c.key for c in seen] == ["ns/c"]
