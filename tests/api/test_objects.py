"""The read-only views name the API's defaults once: an absent field reads as its default, a
present one as written, and the body is never copied or changed."""

from __future__ import annotations

import copy
from typing import Any

from raycluster_operator.api.objects import (
    Lease,
    ObjectList,
    Pod,
    RayClusterObject,
    Resource,
    Service,
)

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "w-0",
        "namespace": "ml",
        "uid": "u1",
        "resourceVersion": "42",
        "labels": {"ray.io/cluster": "c"},
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "deletionTimestamp": "2026-01-01T00:01:00Z",
        "finalizers": ["f"],
        "ownerReferences": [
            {"kind": "RayCluster", "name": "c", "uid": "cu"},
            {"kind": "ReplicaSet", "name": "r"},
        ],
    },
    "spec": {"containers": [{"name": "ray"}], "restartPolicy": "Never", "nodeName": "n1"},
    "status": {
        "phase": "Running",
        "podIP": "10.0.0.2",
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [{"name": "ray", "state": {"running": {}}}],
    },
}


def test_a_pod_reads_as_written() -> None:
    pod = Pod(POD)
    assert (pod.kind, pod.api_version, pod.name, pod.namespace, pod.key) == (
        "Pod",
        "v1",
        "w-0",
        "ml",
        "ml/w-0",
    )
    assert (pod.uid, pod.resource_version, pod.created) == ("u1", "42", "2026-01-01T00:00:00Z")
    assert pod.deleting and pod.deletion_timestamp == "2026-01-01T00:01:00Z"
    assert pod.labels == {"ray.io/cluster": "c"} and list(pod.finalizers) == ["f"]
    assert pod.owner_names("RayCluster") == ["c"] and pod.owner_uids == frozenset({"cu"})
    assert (pod.phase, pod.pod_ip, pod.node_name, pod.restart_policy) == (
        "Running",
        "10.0.0.2",
        "n1",
        "Never",
    )
    assert pod.ready and pod.containers[0]["name"] == "ray"
    assert pod.container_statuses[0]["state"] == {"running": {}}


def test_an_empty_object_reads_as_the_api_defaults() -> None:
    pod = Pod({})
    assert (pod.name, pod.namespace, pod.key, pod.uid) == ("", None, "/", None)
    assert (pod.resource_version, pod.generation, pod.created) == ("", None, "")
    assert not pod.deleting and pod.deletion_timestamp is None
    assert dict(pod.labels) == {} and dict(pod.annotations) == {}
    assert list(pod.finalizers) == [] and pod.owner_uids == frozenset()
    assert (pod.phase, pod.pod_ip, pod.ready) == ("", None, False)
    assert list(pod.containers) == [] and list(pod.conditions) == []


def test_null_sections_read_as_absent() -> None:
    pod = Pod({"metadata": None, "spec": None, "status": None})
    assert pod.name == "" and pod.phase == "" and not pod.ready


def test_a_view_never_copies_or_changes_its_body() -> None:
    body = copy.deepcopy(POD)
    pod = Pod(body)
    assert pod.body is body
    _ = (pod.labels, pod.owner_uids, pod.ready, pod.meta)
    assert body == POD


def test_a_pod_is_ready_only_by_its_ready_condition() -> None:
    def ready(conditions: list[dict[str, str]]) -> bool:
        return Pod({"status": {"conditions": conditions}}).ready

    assert not ready([{"type": "PodScheduled", "status": "True"}])
    assert not ready([{"type": "Ready", "status": "False"}])
    assert ready([{"type": "PodScheduled", "status": "False"}, {"type": "Ready", "status": "True"}])


def test_service_lease_cluster_and_list_views() -> None:
    headless = Service({"spec": {"clusterIP": "None", "ports": [{"name": "gcs", "port": 6379}]}})
    assert headless.cluster_ip is None and headless.ports[0]["port"] == 6379
    assert Service({"spec": {"clusterIP": "10.96.0.9"}}).cluster_ip == "10.96.0.9"

    lease = Lease({"spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}})
    assert (lease.holder, lease.duration_seconds, lease.transitions, lease.renew_time) == (
        "a",
        15.0,
        0,
        "",
    )
    assert Lease({}).duration_seconds is None

    cluster = RayClusterObject({"metadata": {"generation": 3}, "spec": {"managedBy": "x"}})
    assert (cluster.generation, cluster.managed_by, dict(cluster.status)) == (3, "x", {})
    assert RayClusterObject({"spec": "not an object"}).managed_by is None

    page = ObjectList({"items": [POD], "metadata": {"resourceVersion": "7", "continue": "t"}})
    assert (len(page.items), page.resource_version, page.continue_token) == (1, "7", "t")
    assert ObjectList({"metadata": {"continue": ""}}).continue_token is None
    assert Resource({"metadata": {"generation": "3"}}).generation is None
