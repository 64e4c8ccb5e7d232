"""Owner-reference garbage collection through the API."""

from __future__ import annotations

from typing import Any

from devkube import DevCluster
from tests.harness import manifests

CM = "/api/v1/namespaces/default/configmaps"
PODS = "/api/v1/namespaces/default/pods"


async def owner(cluster: DevCluster, name: str) -> dict[str, Any]:
    return await cluster.client.create(
        CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
    )


def ref(obj: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        **extra,
    }


async def dependent(cluster: DevCluster, name: str, *refs: dict[str, Any]) -> None:
    await cluster.client.create(
        PODS,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "ownerReferences": list(refs)},
            "spec": {"containers": [{"name": "c", "image": "x"}]},
        },
    )


async def names(cluster: DevCluster, path: str) -> set[str]:
    return {o["metadata"]["name"] for o in (await cluster.client.list(path))["items"]}


async def test_dependents_of_a_deleted_owner_are_deleted(
    dev_cluster: DevCluster, eventually: Any
) -> None:
    parent = await owner(dev_cluster, "parent")
    other = await owner(dev_cluster, "other")
    await dependent(dev_cluster, "child-a", ref(parent))
    await dependent(dev_cluster, "child-b", ref(parent, controller=True))
    await dependent(dev_cluster, "shared", ref(parent), ref(other))
    await dependent(dev_cluster, "unrelated", ref(other))
    await dev_cluster.client.delete(f"{CM}/parent")

    async def collected() -> None:
        assert await names(dev_cluster, PODS) == {"shared", "unrelated"}

    await eventually(collected)

    async def pruned() -> None:
        shared = await dev_cluster.client.get(f"{PODS}/shared")
        assert [r["name"] for r in shared["metadata"]["ownerReferences"]] == ["other"]

    await eventually(pruned)


async def test_an_owner_recreated_with_the_same_name_does_not_save_old_dependents(
    dev_cluster: DevCluster, eventually: Any
) -> None:
    first = await owner(dev_cluster, "phoenix")
    await dependent(dev_cluster, "old-child", ref(first))
    await dev_cluster.client.delete(f"{CM}/phoenix")
    second = await owner(dev_cluster, "phoenix")
    await dependent(dev_cluster, "new-child", ref(second))

    async def collected() -> None:
        assert await names(dev_cluster, PODS) == {"new-child"}

    await eventually(collected)


async def test_orphan_policy_keeps_dependents(dev_cluster: DevCluster, eventually: Any) -> None:
    parent = await owner(dev_cluster, "parent")
    await dependent(dev_cluster, "kept", ref(parent))
    await dev_cluster.client.delete(f"{CM}/parent", propagation_policy="Orphan")

    async def orphaned() -> None:
        assert "parent" not in await names(dev_cluster, CM)
        kept = await dev_cluster.client.get(f"{PODS}/kept")
        assert not kept["metadata"].get("ownerReferences")

    await eventually(orphaned)


async def test_foreground_deletion_waits_for_blocking_dependents(
    dev_cluster: DevCluster, eventually: Any
) -> None:
    parent = await owner(dev_cluster, "parent")
    await dependent(dev_cluster, "blocker", ref(parent, blockOwnerDeletion=True))
    await dev_cluster.client.delete(f"{CM}/parent", propagation_policy="Foreground")
    deleting = await dev_cluster.client.get(f"{CM}/parent")
    assert deleting["metadata"]["deletionTimestamp"]

    async def all_gone() -> None:
        assert "blocker" not in await names(dev_cluster, PODS)
        assert "parent" not in await names(dev_cluster, CM)

    await eventually(all_gone)


async def test_dependents_of_a_custom_resource_registered_at_run_time(
    dev_cluster: DevCluster, eventually: Any
) -> None:
    crd = manifests.crd("gadgets", "Gadget", subresources=None)
    _, gadget = await dev_cluster.install(
        [crd, {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}}]
    )
    owned = {
        "apiVersion": "example.com/v1",
        "kind": "Gadget",
        "name": "g",
        "uid": gadget["metadata"]["uid"],
        "controller": True,
    }
    await dependent(dev_cluster, "gadget-pod", owned)
    await dependent(dev_cluster, "loner")
    # While the owner lives, its dependent does too, whatever the collector's caches say.
    start = dev_cluster.garbage_collector.passes

    async def two_passes() -> None:
        assert dev_cluster.garbage_collector.passes >= start + 2

    await eventually(two_passes)
    assert await names(dev_cluster, PODS) == {"gadget-pod", "loner"}
    await dev_cluster.client.delete("/apis/example.com/v1/namespaces/default/gadgets/g")

    async def collected() -> None:
        assert await names(dev_cluster, PODS) == {"loner"}

    await eventually(collected)
