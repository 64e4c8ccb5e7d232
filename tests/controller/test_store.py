from __future__ import annotations

from raycluster_operator.controller.runtime.store import Store, by_label, by_owner


def pod(name: str, cluster: str | None, rv: str = "1", ns: str = "ns") -> dict:
    labels = {"ray.io/cluster": cluster} if cluster else {}
    return {"metadata": {"name": name, "namespace": ns, "labels": labels, "resourceVersion": rv}}


def test_index_by_cluster_label_follows_updates_and_removals() -> None:
    store = Store({"cluster": by_label("ray.io/cluster")})
    store.upsert(pod("a", "c1"))
    store.upsert(pod("b", "c1"))
    store.upsert(pod("c", "c2"))
    assert [p["metadata"]["name"] for p in store.by_index("cluster", "ns/c1")] == ["a", "b"]
    store.upsert(pod("b", "c2", rv="2"))
    assert [p["metadata"]["name"] for p in store.by_index("cluster", "ns/c2")] == ["b", "c"]
    store.remove("ns/c")
    assert [p["metadata"]["name"] for p in store.by_index("cluster", "ns/c2")] == ["b"]


def test_same_cluster_name_in_two_namespaces_is_kept_apart() -> None:
    store = Store({"cluster": by_label("ray.io/cluster")})
    store.upsert(pod("a", "c", ns="one"))
    store.upsert(pod("a", "c", ns="two"))
    assert len(store.by_index("cluster", "one/c")) == 1


def test_owner_index() -> None:
    store = Store({"owner": by_owner("RayCluster")})
    svc = pod("svc", None)
    svc["metadata"]["ownerReferences"] = [{"kind": "RayCluster", "name": "c1"}]
    store.upsert(svc)
    assert store.by_index("owner", "ns/c1") == [svc]


def test_replace_reports_what_changed_while_away() -> None:
    store = Store()
    store.upsert(pod("kept", "c"))
    store.upsert(pod("changed", "c"))
    store.upsert(pod("removed", "c"))
    changes = store.replace([pod("kept", "c"), pod("changed", "c", rv="2"), pod("new", "c")])
    summary = sorted((t, (n or o or {})["metadata"]["name"]) for t, o, n in changes)
    assert summary == [("ADDED", "new"), ("DELETED", "removed"), ("MODIFIED", "changed")]
