"""The checker the hardening tests rely on does catch what it claims to catch."""

from __future__ import annotations

from typing import Any

from tests.harness.hardening_world import Checker


def pod(name: str, index: int, replica: str, *, host: int = 0, deleting: bool = False) -> Any:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "labels": {
            "ray.io/cluster": "c",
            "ray.io/group": "g",
            "ray.io/node-type": "worker",
            "ray.io/worker-group-replica-index": str(index),
            "ray.io/worker-group-replica-name": replica,
            "ray.io/replica-host-index": str(host),
            "app.kubernetes.io/created-by": "raycluster-operator",
        },
        "ownerReferences": [{"kind": "RayCluster", "name": "c", "uid": "u", "controller": True}],
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta}


def cluster(generation: int, replicas: int, observed: int, desired: int) -> Any:
    return {
        "metadata": {"name": "c", "namespace": "default", "generation": generation},
        "spec": {"workerGroupSpecs": [{"groupName": "g", "replicas": replicas, "numOfHosts": 4}]},
        "status": {"observedGeneration": observed, "desiredWorkerReplicas": desired},
    }


def test_an_index_reused_while_the_old_slice_still_has_pods_is_caught() -> None:
    checker = Checker(kube=None)  # type: ignore[arg-type]
    checker.check_pods([pod("a", 0, "g-aaaaa"), pod("b", 0, "g-aaaaa", host=1)])
    assert checker.violations == []
    checker.check_pods([pod("a", 0, "g-aaaaa", deleting=True), pod("n", 0, "g-bbbbb")])
    assert checker.violations and "index 0" in checker.violations[0]


def test_an_unowned_operator_pod_is_caught() -> None:
    checker = Checker(kube=None)  # type: ignore[arg-type]
    stray = pod("a", 0, "g-aaaaa")
    stray["metadata"]["ownerReferences"] = []
    checker.check_pods([stray])
    assert checker.violations == ["pod a has no RayCluster controller"]


def test_a_spec_the_test_did_not_write_and_a_wrong_or_regressing_status_are_caught() -> None:
    checker = Checker(kube=None)  # type: ignore[arg-type]
    checker.note_write(cluster(1, 2, 0, 0))
    checker.check_cluster(cluster(1, 2, 1, 8))
    assert checker.violations == [] and checker.spec_violations() == []
    checker.check_cluster(cluster(1, 3, 1, 8))  # spec changed without a test write
    assert checker.spec_violations() == ["default/c: spec at generation 1 differs from the test's"]
    checker.violations.clear()
    checker.check_cluster(cluster(1, 2, 1, 12))  # current generation, wrong count
    checker.check_cluster(cluster(1, 2, 0, 8))  # observedGeneration went back
    assert checker.violations == [
        "default/c: status.desiredWorkerReplicas 12, the spec wants 8",
        "default/c: status.observedGeneration went back to 0",
    ]
