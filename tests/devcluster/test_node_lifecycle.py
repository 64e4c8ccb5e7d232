"""Node lifecycle as a user sees it with the real kubectl: heartbeats (Leases), a stopped
kubelet going Unknown and tainted, taint-based eviction, default tolerations at admission,
pod GC of a deleted node's pods, cordon and drain."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import yaml

from devkube import DevCluster
from tests.harness.cluster import running_cluster

# The shared fixtures' types (tests/conftest.py), named here: conftest is not importable by name
# when several test directories run together.
Kubectl = Callable[..., Awaitable[Any]]
Eventually = Callable[..., Awaitable[Any]]

GRACE = 2.0  # seconds without heartbeat before Unknown (dev default 10, kube 40)
NODE = "cpu-0-n0"
OTHER = "cpu-0-n1"
ANNOTATION = "dev.raycluster-operator.io/kubelet"
UNREACHABLE = "node.kubernetes.io/unreachable"
NOT_READY = "node.kubernetes.io/not-ready"


@pytest.fixture
async def dev_cluster() -> AsyncIterator[DevCluster]:
    """Three plain nodes, a short grace period."""
    async with running_cluster(nodes=["cpu:3"], node_grace=GRACE) as cluster:
        yield cluster


def pod_yaml(
    name: str, node: str = NODE, tolerations: list[dict[str, Any]] | None = None, **spec: Any
) -> str:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "containers": [{"name": "c", "image": "busybox:1.36"}],
            **spec,
        },
    }
    if tolerations is not None:
        body["spec"]["tolerations"] = tolerations
    return yaml.safe_dump(body)


async def get_json(kubectl: Kubectl, *args: str) -> Any:
    result = await kubectl("get", *args, "-o", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def ready_of(obj: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in obj["status"].get("conditions") or [] if c["type"] == "Ready")


def taints_of(node: dict[str, Any]) -> set[tuple[str, str]]:
    return {(t["key"], t["effect"]) for t in node["spec"].get("taints") or []}


async def running(kubectl: Kubectl, *names: str) -> None:
    for name in names:
        pod = await get_json(kubectl, "pod", name)
        assert pod["status"]["phase"] == "Running" and ready_of(pod)["status"] == "True", name


async def test_stopped_kubelet_goes_unknown_tainted_and_comes_back(
    kubectl: Kubectl, eventually: Eventually
) -> None:
    await kubectl("apply", "-f", "-", input=pod_yaml("resident"))
    await eventually(lambda: running(kubectl, "resident"))

    async def leases_renewed() -> dict[str, str]:
        leases = await get_json(kubectl, "leases", "-n", "kube-node-lease")
        by_node = {i["metadata"]["name"]: i for i in leases["items"]}
        assert set(by_node) == {NODE, OTHER, "cpu-0-n2"}
        lease = by_node[NODE]
        assert lease["spec"]["holderIdentity"] == NODE
        assert lease["metadata"]["ownerReferences"][0]["kind"] == "Node"
        return {name: i["spec"]["renewTime"] for name, i in by_node.items()}

    before = await eventually(leases_renewed)
    table = await kubectl("get", "leases", "-n", "kube-node-lease")
    assert table.stdout.split()[:3] == ["NAME", "HOLDER", "AGE"], table.stdout
    assert f"{NODE}   {NODE}" in table.stdout, table.stdout

    stopped = await kubectl("annotate", "node", NODE, f"{ANNOTATION}=stopped")
    assert stopped.returncode == 0, stopped.stderr

    async def unknown_and_tainted() -> None:
        node = await get_json(kubectl, "node", NODE)
        ready = ready_of(node)
        assert ready["status"] == "Unknown"
        assert ready["reason"] == "NodeStatusUnknown"
        assert ready["message"] == "Kubelet stopped posting node status."
        assert {(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")} <= taints_of(node)
        no_execute = [t for t in node["spec"]["taints"] if t["effect"] == "NoExecute"]
        assert all(t.get("timeAdded") for t in no_execute)
        # Every condition goes Unknown, as kube's controller does it.
        assert {c["status"] for c in node["status"]["conditions"]} == {"Unknown"}

    await eventually(unknown_and_tainted)
    # The pod's Ready goes False (its kubelet cannot say so); the 300 s default toleration
    # keeps it bound for now.
    pod = await get_json(kubectl, "pod", "resident")
    assert ready_of(pod)["status"] == "False"
    assert not pod["metadata"].get("deletionTimestamp")
    nodes = await kubectl("get", "nodes")
    assert f"{NODE}   NotReady" in nodes.stdout, nodes.stdout

    async def lease_stale_others_renewed() -> None:
        now = await leases_renewed()
        assert now[NODE] == before[NODE] or now[NODE] < now[OTHER]
        assert now[OTHER] > before[OTHER]

    await eventually(lease_stale_others_renewed)

    # Removing the annotation (or =running) starts the kubelet again.
    back = await kubectl("annotate", "node", NODE, f"{ANNOTATION}-")
    assert back.returncode == 0, back.stderr

    async def ready_again() -> None:
        node = await get_json(kubectl, "node", NODE)
        assert ready_of(node)["status"] == "True"
        assert ready_of(node)["reason"] == "KubeletReady"
        pressure = [c for c in node["status"]["conditions"] if c["type"] != "Ready"]
        assert len(pressure) == 3 and {c["status"] for c in pressure} == {"False"}
        assert not {k for k, _ in taints_of(node)} & {UNREACHABLE, NOT_READY}

    await eventually(ready_again)
    await eventually(lambda: running(kubectl, "resident"))


async def test_default_tolerations_at_admission_and_own_tolerations_kept(
    kubectl: Kubectl,
) -> None:
    await kubectl("apply", "-f", "-", input=pod_yaml("plain"))
    got = yaml.safe_load((await kubectl("get", "pod", "plain", "-o", "yaml")).stdout)
    assert got["spec"]["tolerations"] == [
        {"key": NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    ]
    own = {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 7}
    await kubectl("apply", "-f", "-", input=pod_yaml("own", tolerations=[own]))
    got = yaml.safe_load((await kubectl("get", "pod", "own", "-o", "yaml")).stdout)
    assert got["spec"]["tolerations"] == [
        own,
        {"key": NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    ]
    everything = {"operator": "Exists"}
    await kubectl("apply", "-f", "-", input=pod_yaml("all", tolerations=[everything]))
    got = yaml.safe_load((await kubectl("get", "pod", "all", "-o", "yaml")).stdout)
    assert got["spec"]["tolerations"] == [everything]


async def test_eviction_when_the_toleration_runs_out(
    kubectl: Kubectl, eventually: Eventually
) -> None:
    short = [{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute",
              "tolerationSeconds": 1}]  # fmt: skip
    forever = [{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute"}]
    await kubectl("apply", "-f", "-", input=pod_yaml("brief", tolerations=short))
    await kubectl("apply", "-f", "-", input=pod_yaml("stubborn", tolerations=forever))
    await kubectl("apply", "-f", "-", input=pod_yaml("patient"))  # the default 300 s
    await eventually(lambda: running(kubectl, "brief", "stubborn", "patient"))
    await kubectl("annotate", "node", NODE, f"{ANNOTATION}=stopped")

    async def evicted() -> None:
        pod = await get_json(kubectl, "pod", "brief")
        assert pod["metadata"].get("deletionTimestamp")
        target = [c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget"]
        assert target and target[0]["reason"] == "DeletionByTaintManager"

    await eventually(evicted)
    # With the kubelet stopped nothing finishes the deletion: Terminating, as on a real
    # partitioned node. The others stay.
    for name in ("stubborn", "patient"):
        pod = await get_json(kubectl, "pod", name)
        assert not pod["metadata"].get("deletionTimestamp"), name
    events = await kubectl("get", "events", "--field-selector", "reason=TaintManagerEviction")
    assert "Marking for deletion Pod default/brief" in events.stdout, events.stdout
    # The kubelet back finishes the deletion.
    await kubectl("annotate", "node", NODE, f"{ANNOTATION}=running", "--overwrite")

    async def gone() -> None:
        names = (await kubectl("get", "pods", "-o", "name")).stdout.split()
        assert "pod/brief" not in names and {"pod/stubborn", "pod/patient"} <= set(names)

    await eventually(gone)
    await eventually(lambda: running(kubectl, "stubborn", "patient"))


async def test_an_untolerated_no_execute_taint_evicts_at_once(
    kubectl: Kubectl, eventually: Eventually
) -> None:
    tolerant = [{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoExecute"}]
    await kubectl("apply", "-f", "-", input=pod_yaml("guest"))
    await kubectl("apply", "-f", "-", input=pod_yaml("owner", tolerations=tolerant))
    await eventually(lambda: running(kubectl, "guest", "owner"))
    tainted = await kubectl("taint", "node", NODE, "dedicated=ml:NoExecute")
    assert tainted.returncode == 0, tainted.stderr

    async def only_owner_left() -> None:
        names = (await kubectl("get", "pods", "-o", "name")).stdout.split()
        assert names == ["pod/owner"]

    await eventually(only_owner_left)
    # NoExecute also keeps new pods off (as NoSchedule does).
    await kubectl("apply", "-f", "-", input=pod_yaml("late"))

    async def unschedulable() -> None:
        pod = await get_json(kubectl, "pod", "late")
        scheduled = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
        assert scheduled["status"] == "False"
        assert "untolerated taint {dedicated: ml}" in scheduled["message"]

    await eventually(unschedulable)


async def test_deleting_a_node_deletes_its_pods_and_lease(
    kubectl: Kubectl, eventually: Eventually
) -> None:
    await kubectl("apply", "-f", "-", input=pod_yaml("doomed"))
    await kubectl("apply", "-f", "-", input=pod_yaml("safe", node=OTHER))
    await eventually(lambda: running(kubectl, "doomed", "safe"))
    deleted = await kubectl("delete", "node", NODE)
    assert deleted.returncode == 0, deleted.stderr

    async def pods_and_lease_gone() -> None:
        names = (await kubectl("get", "pods", "-o", "name")).stdout.split()
        assert names == ["pod/safe"]
        leases = (await kubectl("get", "leases", "-n", "kube-node-lease", "-o", "name")).stdout
        assert f"lease.coordination.k8s.io/{NODE}" not in leases.split()

    await eventually(pods_and_lease_gone)
    await running(kubectl, "safe")


async def test_out_of_service_taint_releases_pods_stuck_on_a_dead_node(
    kubectl: Kubectl, eventually: Eventually
) -> None:
    await kubectl("apply", "-f", "-", input=pod_yaml("stuck"))
    await eventually(lambda: running(kubectl, "stuck"))
    await kubectl("annotate", "node", NODE, f"{ANNOTATION}=stopped")

    async def unknown() -> None:
        assert ready_of(await get_json(kubectl, "node", NODE))["status"] == "Unknown"

    await eventually(unknown)
    await kubectl("delete", "pod", "stuck", "--wait=false")
    pod = await get_json(kubectl, "pod", "stuck")
    assert pod["metadata"]["deletionTimestamp"]  # Terminating: no kubelet to finish it
    await kubectl("taint", "node", NODE, "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute")

    async def released() -> None:
        assert (await kubectl("get", "pods", "-o", "name")).stdout.split() == []

    await eventually(released)


async def test_cordon_and_drain(
    kubectl: Kubectl, eventually: Eventually, dev_cluster: DevCluster
) -> None:
    owner = await dev_cluster.apply(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}}
    )
    ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }
    for name in ("w1", "w2"):
        body = yaml.safe_load(pod_yaml(name, volumes=[{"name": "scratch", "emptyDir": {}}]))
        body["metadata"]["ownerReferences"] = [ref]
        await kubectl("apply", "-f", "-", input=yaml.safe_dump(body))
    await eventually(lambda: running(kubectl, "w1", "w2"))
    cordoned = await kubectl("cordon", NODE)
    assert cordoned.returncode == 0, cordoned.stderr
    node = await get_json(kubectl, "node", NODE)
    assert node["spec"]["unschedulable"] is True

    async def unschedulable_taint() -> None:
        taints = taints_of(await get_json(kubectl, "node", NODE))
        assert ("node.kubernetes.io/unschedulable", "NoSchedule") in taints

    await eventually(unschedulable_taint)
    drained = await kubectl(
        "drain", NODE, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=60s"
    )
    assert drained.returncode == 0, drained.stderr
    assert f"node/{NODE} drained" in drained.stdout, drained.stdout
    assert (await kubectl("get", "pods", "-o", "name")).stdout.split() == []
    await kubectl("apply", "-f", "-", input=pod_yaml("waiting"))

    async def pending() -> None:
        pod = await get_json(kubectl, "pod", "waiting")
        scheduled = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
        assert scheduled["reason"] == "Unschedulable"

    await eventually(pending)
    uncordoned = await kubectl("uncordon", NODE)
    assert uncordoned.returncode == 0, uncordoned.stderr
    await eventually(lambda: running(kubectl, "waiting"))
    node = await get_json(kubectl, "node", NODE)
    assert ("node.kubernetes.io/unschedulable", "NoSchedule") not in taints_of(node)
