"""Ray v2's idle-cluster termination (`spec.idleTerminationOptions`), end to end.

With no driver attached for `timeoutSeconds`, Ray's `KubeRayProvider` either merge-patches
`spec.idleSuspend: true` (policy Suspend) or adds the finalizer
`ray.io/idle-termination-cleanup-finalizer` and deletes the RayCluster (policy Delete). The
GCS is the only source of "no driver": a stub answering "no jobs" stands in for it.
"""

from __future__ import annotations

from typing import Any

FINALIZER = "ray.io/idle-termination-cleanup-finalizer"


class NoJobs:
    """The one GCS call idle termination makes, answering that no driver ever ran."""

    def get_all_job_info(self, **_: Any) -> dict[str, Any]:
        return {}


def _provider(world: Any, ns: str, name: str) -> Any:
    return world.v2_provider(ns, name, gcs_client=NoJobs())


def _gone(world: Any, ns: str, name: str) -> bool:
    try:
        world.get_cluster(ns, name)
    except AssertionError as error:
        return "404" in str(error)
    return False


def _drive_until_deleted(provider: Any, world: Any, ns: str, name: str) -> None:
    """Run Ray's provider loop until its DELETE lands (a few iterations at most).

    Ray guards its finalizer patch with a resourceVersion test; while the operator is still
    writing status the guard may trip, and Ray retries on its next iteration.
    """
    for _ in range(5):
        provider.get_non_terminated()
        if _gone(world, ns, name) or world.get_cluster(ns, name)["metadata"].get(
            "deletionTimestamp"
        ):
            return


def _cluster_with(kit: Any, name: str, policy: str) -> dict[str, Any]:
    obj = kit.raycluster(name, kit.cpu_group(replicas=1))
    obj["spec"]["idleTerminationOptions"] = {"timeoutSeconds": 0, "policy": policy}
    return obj  # type: ignore[no-any-return]


def test_delete_policy_adds_the_finalizer_and_deletes(world: Any, ns: str, kit: Any) -> None:
    world.create_cluster(ns, _cluster_with(kit, "idle", "Delete"))
    _drive_until_deleted(_provider(world, ns, "idle"), world, ns, "idle")

    if not _gone(world, ns, "idle"):
        meta = world.get_cluster(ns, "idle")["metadata"]
        assert meta.get("deletionTimestamp"), "Ray's DELETE did not land"
        assert FINALIZER in meta["finalizers"]


def test_delete_policy_removes_the_cluster(world: Any, ns: str, kit: Any) -> None:
    world.create_cluster(ns, _cluster_with(kit, "gone", "Delete"))
    world.wait_workers(ns, "gone", "cpu", 1)

    _drive_until_deleted(_provider(world, ns, "gone"), world, ns, "gone")

    world.wait("the RayCluster removed", lambda: _gone(world, ns, "gone"), timeout=1.5)


def test_suspend_policy_removes_the_workers(world: Any, ns: str, kit: Any) -> None:
    world.create_cluster(ns, _cluster_with(kit, "nap", "Suspend"))
    world.wait_workers(ns, "nap", "cpu", 1)

    _provider(world, ns, "nap").get_non_terminated()

    assert world.get_cluster(ns, "nap")["spec"]["idleSuspend"] is True
    world.wait("every pod terminating", lambda: not world.live_names(ns, "nap"), timeout=1.5)
