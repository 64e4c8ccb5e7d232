"""The informer caches' transforms keep every field the planner reads, and only those.

The planner runs over pods as the API server serves them (builder manifests with the server's
and kubelet's fields added, managedFields included) and over the slim copies the caches keep;
the plans must be identical at every step of a convergence, for any scenario of the planning
property tests. The dropped fields are then checked to be gone.
"""

from __future__ import annotations

import copy
import json
from datetime import timedelta

from hypothesis import given, settings

from planning.cluster import cluster_obj
from planning.test_cluster_convergence import Scenario, scenarios
from planning.world import BASE, World, stamp, suffixes
from raycluster_operator.api.objects import Obj
from raycluster_operator.controller.raycluster.transforms import (
    slim_named,
    slim_node,
    slim_pod,
    slim_service,
    without_managed_fields,
)
from raycluster_operator.controller.runtime.events import reference
from raycluster_operator.planning.features.host_loss import node_loss
from raycluster_operator.planning.pass_plan import (
    ClusterState,
    PassPlan,
    PlanOptions,
    object_id,
    plan_pass,
)
from raycluster_operator.planning.pods import read_pod

MANAGED_FIELDS = [
    {
        "manager": "kubelet",
        "operation": "Update",
        "apiVersion": "v1",
        "time": "2026-01-01T00:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:status": {"f:conditions": {}, "f:containerStatuses": {}}},
        "subresource": "status",
    }
]


def as_served(pod: Obj, serial: int) -> Obj:
    """A planning-world pod as the API server would return it: everything the server, the
    scheduler and the kubelet add, and a full container spec."""
    out = copy.deepcopy(pod)
    out.setdefault("apiVersion", "v1")
    out.setdefault("kind", "Pod")
    meta = out["metadata"]
    meta.setdefault("resourceVersion", str(serial))
    meta.setdefault("generateName", meta["name"][:-5])
    meta["managedFields"] = MANAGED_FIELDS
    # The server keeps the builder's annotations (the template hash) beside others.
    meta.setdefault("annotations", {}).update({"ray.io/ft-enabled": "false", "note": "x" * 200})
    meta["ownerReferences"] = [
        {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "demo", "uid": "uid-demo"}
    ]
    meta["finalizers"] = ["example.com/hold"]
    spec = out.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec["nodeName"] = f"node-{serial}"
    spec["volumes"] = [{"name": "shm", "emptyDir": {"medium": "Memory"}}]
    spec["tolerations"] = [{"key": "google.com/tpu", "operator": "Exists"}]
    for container in spec.setdefault("containers", [{"name": "ray"}]):
        container.setdefault("image", "rayproject/ray:2.60.0")
        container.setdefault("env", [{"name": "RAY_X", "value": "1"}])
        container["terminationMessagePath"] = "/dev/termination-log"
    status = out.setdefault("status", {})
    status["hostIP"] = "10.1.0.1"
    status["startTime"] = stamp(0)
    status["qosClass"] = "Burstable"
    conditions = status.setdefault("conditions", [])
    for condition in conditions:
        condition["lastTransitionTime"] = stamp(1)
    conditions.insert(0, {"type": "PodScheduled", "status": "True", "lastTransitionTime": "t"})
    statuses = status.setdefault(
        "containerStatuses",
        [{"name": spec["containers"][0]["name"], "state": {"running": {"startedAt": "t"}}}],
    )
    for s in statuses:
        s.update(image="rayproject/ray:2.60.0", containerID="containerd://abc", restartCount=0)
        s["lastState"] = {"terminated": {"exitCode": 0}}
    return out


def as_served_service(manifest: Obj, serial: int) -> Obj:
    out = copy.deepcopy(manifest)
    meta = out["metadata"]
    meta.update(uid=f"uid-svc-{serial}", resourceVersion=str(serial), managedFields=MANAGED_FIELDS)
    meta.setdefault("namespace", "default")
    spec = out.setdefault("spec", {})
    spec.setdefault("clusterIP", f"10.96.0.{serial % 250 + 1}")
    spec["sessionAffinity"] = "None"
    return out


def plan(state: ClusterState, now_s: int, options: PlanOptions) -> PassPlan:
    return plan_pass(
        state, now=BASE + timedelta(seconds=now_s), new_suffix=suffixes(), options=options
    )


@settings(max_examples=60, deadline=None)
@given(scenarios())
def test_plans_over_slim_pods_equal_plans_over_served_pods_at_every_step(
    scenario: Scenario,
) -> None:
    groups, spec, pods, flags = scenario
    options = PlanOptions(
        multi_host_indexing=flags["multi_host_indexing"],
        random_pod_delete=flags["random_pod_delete"],
    )
    lag = 86_400 if flags["stuck"] else 0
    world = World.of(pods)
    cluster = cluster_obj(*groups, **spec)
    cluster["metadata"].update(uid="uid-demo", resourceVersion="1", managedFields=MANAGED_FIELDS)
    services: list[Obj] = []
    present: set[tuple[str, str]] = set()
    for step in range(10):
        served = [as_served(p, i) for i, p in enumerate(world.list())]
        full = ClusterState(cluster, served, services, frozenset(present))
        slim = ClusterState(
            without_managed_fields(cluster),
            [slim_pod(p) for p in served],
            [slim_service(s) for s in services],
            frozenset(present),
        )
        now = world.clock + step + lag
        planned = plan(full, now, options)
        assert plan(slim, now, options) == planned
        if not (planned.creates or planned.deletes or planned.objects or world.terminating()):
            break
        world.step(
            [d.name for d in planned.deletes], manifests=[c.manifest for c in planned.creates]
        )
        for i, obj in enumerate(planned.objects):
            present.add(object_id(obj))
            if obj.get("kind") == "Service":
                services.append(as_served_service(obj, len(services) + i))
        if planned.status is not None:
            cluster["status"] = planned.status


def served_example() -> Obj:
    pod = {
        "metadata": {
            "name": "demo-tpu-worker-abcde",
            "namespace": "default",
            "uid": "u1",
            "labels": {"ray.io/cluster": "demo", "ray.io/group": "tpu"},
            "annotations": {"ray.io/pod-template-hash": "0123456789"},
            "creationTimestamp": stamp(0),
        },
        "spec": {
            "containers": [{"name": "ray-worker", "args": ["ray start " + "--x " * 500]}],
            "restartPolicy": "Never",
        },
        "status": {
            "phase": "Running",
            "podIP": "10.0.0.9",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "ray-worker", "state": {"terminated": {"exitCode": 1}}}],
        },
    }
    return as_served(pod, 7)


def test_a_slim_pod_reads_the_same_and_keeps_nothing_else() -> None:
    served = served_example()
    slim = slim_pod(served)
    assert read_pod(slim) == read_pod(served)
    assert read_pod(slim).failed  # the terminated Ray container under restartPolicy Never
    assert reference(slim) == reference(served)
    assert slim == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "demo-tpu-worker-abcde",
            "namespace": "default",
            "uid": "u1",
            "resourceVersion": "7",
            "creationTimestamp": stamp(0),
            "labels": {"ray.io/cluster": "demo", "ray.io/group": "tpu"},
            "annotations": {"ray.io/pod-template-hash": "0123456789"},
        },
        "spec": {
            "restartPolicy": "Never",
            "nodeName": "node-7",
            "containers": [{"name": "ray-worker"}],
        },
        "status": {
            "phase": "Running",
            "podIP": "10.0.0.9",
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "t"},
                {"type": "Ready", "status": "True", "lastTransitionTime": stamp(1)},
            ],
            "containerStatuses": [
                {
                    "name": "ray-worker",
                    "state": {"terminated": {"exitCode": 1}},
                    "lastState": {"terminated": {"exitCode": 0}},
                }
            ],
        },
    }
    assert len(json.dumps(slim)) * 5 < len(json.dumps(served))


def test_transforms_never_change_their_input() -> None:
    served = served_example()
    before = copy.deepcopy(served)
    slim_pod(served)
    slim_service(served)
    slim_named(served)
    without_managed_fields(served)
    assert served == before


def test_a_service_keeps_its_owner_address_and_ports_and_rbac_only_its_name() -> None:
    service = as_served_service(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": "demo-head-svc",
                "labels": {"ray.io/cluster": "demo"},
                "ownerReferences": [{"kind": "RayCluster", "name": "demo", "uid": "u"}],
                "annotations": {"a": "b"},
            },
            "spec": {"ports": [{"name": "gcs", "port": 6379}], "selector": {"a": "b"}},
        },
        3,
    )
    slim = slim_service(service)
    assert slim["spec"] == {"clusterIP": "10.96.0.4", "ports": [{"name": "gcs", "port": 6379}]}
    assert slim["metadata"]["ownerReferences"] == service["metadata"]["ownerReferences"]
    assert "managedFields" not in slim["metadata"] and "annotations" not in slim["metadata"]
    named = slim_named(service)
    assert set(named) == {"apiVersion", "kind", "metadata"}
    assert named["metadata"]["name"] == "demo-head-svc"


def test_a_node_keeps_what_host_loss_reads() -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "uid": "u", "managedFields": MANAGED_FIELDS, "labels": {}},
        "spec": {"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "x": "y"}
            ],
            "images": [{"names": ["big"], "sizeBytes": 1}],
            "capacity": {"cpu": "8"},
        },
    }
    slim = slim_node(node)
    assert node_loss(slim) == node_loss(node) == "node n1 is Unknown (NodeStatusUnknown)"
    assert slim["spec"] == node["spec"]
    assert set(slim["status"]) == {"conditions"}
    assert "managedFields" not in slim["metadata"]
    node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    assert (
        node_loss(slim_node(node))
        == node_loss(node)
        == ("node n1 is tainted node.kubernetes.io/unreachable:NoExecute")
    )


def test_a_raycluster_loses_only_its_managed_fields() -> None:
    obj = cluster_obj()
    obj["metadata"]["managedFields"] = MANAGED_FIELDS
    obj["status"] = {"state": "ready"}
    kept = without_managed_fields(obj)
    assert "managedFields" not in kept["metadata"]
    assert {**kept, "metadata": {**kept["metadata"], "managedFields": MANAGED_FIELDS}} == obj
    plain = cluster_obj()
    assert without_managed_fields(plain) is plain


def test_an_upgrade_plans_the_same_over_slim_pods() -> None:
    """The template hash survives the cache: a rolling upgrade sees outdated pods in it."""
    from planning.test_upgrade import settled, spec, with_image

    obj = spec(replicas=2, strategy={"type": "RollingUpdate"})
    loop = settled(obj)
    changed = with_image(obj, "b")
    served = [as_served(p, i) for i, p in enumerate(loop.world.list())]
    options = PlanOptions()
    full = plan(ClusterState(changed, served), 100, options)
    slim = plan(ClusterState(changed, [slim_pod(p) for p in served]), 100, options)
    assert slim == full
    assert {d.reason.value for d in full.deletes} == {"TemplateChanged"}
