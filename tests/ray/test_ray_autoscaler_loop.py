"""Ray's own autoscaler v2 loop (`ray.autoscaler.v2.autoscaler.Autoscaler`) driving the operator.

Everything above the GCS is Ray's: the config reader over `AutoscalingConfigProducer`, the
resource-demand scheduler, the instance manager and its reconciler, the Ray stopper and
`KubeRayProvider`. The GCS is the one piece a dev cluster without real Ray processes cannot
give, so `PodGcs` answers its few calls from the pods themselves: every Running pod is a Ray
node with its node type's resources, idle unless the test says otherwise, and pending demand
is whatever the test asks for. A raylet learns its instance id and node type from the env vars
RAY_CLOUD_INSTANCE_ID and RAY_NODE_TYPE_NAME of its container; `PodGcs` reads them from the
pods the operator built, so Ray can only match nodes to pods if our pods set them right.
"""

from __future__ import annotations

import hashlib
import importlib
import re
from typing import Any

from ray.core.generated import autoscaler_pb2

HOSTS = 4


class PodGcs:
    """The GCS calls Ray's v2 autoscaler makes, answered from the dev cluster's pods."""

    address = "127.0.0.1:6379"

    def __init__(self, world: Any, ns: str, cluster: str) -> None:
        self.world, self.ns, self.cluster = world, ns, cluster
        self.demand: list[tuple[dict[str, float], int]] = []
        self.busy: set[str] = set()
        self.drained: set[str] = set()
        self.version = 0

    @staticmethod
    def node_id(pod_name: str) -> bytes:
        return hashlib.sha1(pod_name.encode()).digest()[:28]

    def get_cluster_resource_state(self) -> bytes:
        self.version += 1
        state = autoscaler_pb2.ClusterResourceState(
            cluster_resource_state_version=self.version,
            last_seen_autoscaler_state_version=0,
            cluster_session_name="session",
        )
        types = self.world.autoscaling_config(self.ns, self.cluster)["available_node_types"]
        for pod in self.world.pods(self.ns, self.cluster):
            name = pod["metadata"]["name"]
            labels = pod["metadata"]["labels"]
            if "deletionTimestamp" in pod["metadata"] or not _running(pod):
                continue
            node_type = _env(pod, "RAY_NODE_TYPE_NAME")
            total = {k: float(v) for k, v in types[node_type]["resources"].items()}
            if labels["ray.io/node-type"] == "head":
                total["node:__internal_head__"] = 1.0  # how Ray tells the head apart
            node = state.node_states.add()
            node.node_id = self.node_id(name)
            node.instance_id = _env(pod, "RAY_CLOUD_INSTANCE_ID")
            node.ray_node_type_name = node_type
            node.node_ip_address = pod["status"].get("podIP", "")
            node.total_resources.update(total)
            if name in self.drained:
                node.status = autoscaler_pb2.NodeStatus.DEAD
            elif name in self.busy or labels["ray.io/node-type"] == "head":
                node.status = autoscaler_pb2.NodeStatus.RUNNING
            else:
                node.status = autoscaler_pb2.NodeStatus.IDLE
                node.idle_duration_ms = 3_600_000
                node.available_resources.update(total)
        for bundle, count in self.demand:
            request = state.pending_resource_requests.add()
            request.request.resources_bundle.update(bundle)
            request.count = count
        reply = autoscaler_pb2.GetClusterResourceStateReply(cluster_resource_state=state)
        return reply.SerializeToString()  # type: ignore[no-any-return]

    def drain_node(self, node_id: str, **_: Any) -> tuple[bool, str]:
        for pod in self.world.pods(self.ns, self.cluster):
            if self.node_id(pod["metadata"]["name"]).hex() == node_id:
                self.drained.add(pod["metadata"]["name"])
        return True, ""

    def drain_nodes(self, node_ids: list[bytes], **_: Any) -> list[bytes]:
        return list(node_ids)


def _env(pod: dict[str, Any], name: str) -> str:
    """The value a container would see for `name` (plain or a metadata fieldRef)."""
    env = {e["name"]: e for e in pod["spec"]["containers"][0].get("env", [])}
    entry = env[name]
    if "value" in entry:
        return str(entry["value"])
    path = entry["valueFrom"]["fieldRef"]["fieldPath"]
    if path == "metadata.name":
        return str(pod["metadata"]["name"])
    match = re.fullmatch(r"metadata\.labels\['(.+)'\]", path)
    assert match, f"unexpected fieldPath {path}"
    return str(pod["metadata"]["labels"][match.group(1)])


def _running(pod: dict[str, Any]) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return bool(statuses) and "running" in statuses[0].get("state", {})


def _autoscaler(world: Any, ns: str, name: str, gcs: PodGcs) -> Any:
    """Ray's v2 Autoscaler, wired as `run_kuberay_autoscaler` wires it."""
    config_mod = importlib.import_module("ray.autoscaler.v2.instance_manager.config")
    producer_mod = importlib.import_module("ray.autoscaler._private.kuberay.autoscaling_config")
    autoscaler_mod = importlib.import_module("ray.autoscaler.v2.autoscaler")
    world.as_autoscaler(ns, name)
    reader = config_mod.KubeRayConfigReader(producer_mod.AutoscalingConfigProducer(name, ns))
    return autoscaler_mod.Autoscaler("session", reader, gcs)


def test_ray_autoscaler_scales_a_tpu_slice_up_and_down(world: Any, ns: str, kit: Any) -> None:
    group = kit.tpu_group("tpu", max_replicas=2)
    group["idleTimeoutSeconds"] = 1
    world.create_cluster(ns, kit.raycluster("loop", group))
    world.wait("the head running", lambda: world.live_names(ns, "loop", "headgroup"))
    gcs = PodGcs(world, ns, "loop")
    autoscaler = _autoscaler(world, ns, "loop", gcs)

    # A JAX job on one v6e-16 slice: four hosts' worth of TPU, one of them the slice head.
    gcs.demand = [({"TPU": 4, "TPU-v6e-16-head": 1}, 1), ({"TPU": 4}, HOSTS - 1)]

    def step() -> Any:
        state = autoscaler.update_autoscaling_state()
        assert state is not None
        return state

    def scaled_up() -> Any:
        step()
        return kit.complete_slices(world.pods(ns, "loop"), "tpu", HOSTS, running=True)

    slices = world.wait("Ray's autoscaler to bring up one slice", scaled_up)
    assert list(slices) == [0]
    assert world.get_cluster(ns, "loop")["spec"]["workerGroupSpecs"][0]["replicas"] == 1

    # Demand gone and the hosts idle past idleTimeoutSeconds: Ray drains and terminates them.
    gcs.demand = []
    names = {p["metadata"]["name"] for p in slices[0]}

    def scaled_down() -> bool:
        step()
        return not names & world.live_names(ns, "loop")

    world.wait("Ray's autoscaler to remove the slice", scaled_down)
    assert world.get_cluster(ns, "loop")["spec"]["workerGroupSpecs"][0]["replicas"] == 0


def test_ray_autoscaler_idle_hosts_of_a_busy_slice(world: Any, ns: str, kit: Any) -> None:
    """Ray's scheduler knows nodes, not slices: with one host busy and three idle it terminates
    the three, asking for 3 // 4 = 0 slices, and the slice can only go whole, busy host too."""
    group = kit.tpu_group("tpu", replicas=1, max_replicas=2)
    group["idleTimeoutSeconds"] = 1
    world.create_cluster(ns, kit.raycluster("busy", group))
    slices = world.wait_slices(ns, "busy", "tpu", HOSTS, 1, running=True)
    members = [p["metadata"]["name"] for p in slices[0]]
    gcs = PodGcs(world, ns, "busy")
    gcs.busy = {members[0]}
    autoscaler = _autoscaler(world, ns, "busy", gcs)

    def acted() -> bool:
        assert autoscaler.update_autoscaling_state() is not None
        spec = world.get_cluster(ns, "busy")["spec"]["workerGroupSpecs"][0]
        return bool(spec.get("scaleStrategy", {}).get("workersToDelete"))

    world.wait("Ray's autoscaler to terminate idle hosts", acted)
    spec = world.get_cluster(ns, "busy")["spec"]["workerGroupSpecs"][0]
    assert sorted(spec["scaleStrategy"]["workersToDelete"]) == sorted(members[1:])
    assert spec["replicas"] == 0
    world.wait("the whole slice deleting", lambda: not set(members) & world.live_names(ns, "busy"))


HOLD = "test.raycluster-operator/hold"


def test_a_lost_host_never_buys_a_slice_for_the_min_count(
    world: Any, ns: str, kit: Any, corrected: None
) -> None:
    """Issue #38 item 2, deterministically. A host is deleted; the operator deletes its slice
    whole and recreates it at its own index once no pod carries that index (rule 13). Until
    then Ray's provider sees no worker of the group (it skips terminating pods), so Ray's
    scheduler found `minReplicas` unmet and launched a slice, which the provider added on top
    of `replicas`: 1 -> 2, a slice bought and idled away. A finalizer on the other host holds
    that window open for as many autoscaler passes as the test likes."""
    group = kit.tpu_group("tpu", replicas=1, min_replicas=1, max_replicas=2)
    world.create_cluster(ns, kit.raycluster("lost", group))
    hosts = world.wait_slices(ns, "lost", "tpu", HOSTS, 1, running=True)[0]
    gcs = PodGcs(world, ns, "lost")
    autoscaler = _autoscaler(world, ns, "lost", gcs)

    def replicas_after_a_pass() -> int:
        assert autoscaler.update_autoscaling_state() is not None
        return int(world.get_cluster(ns, "lost")["spec"]["workerGroupSpecs"][0]["replicas"])

    assert replicas_after_a_pass() == 1
    held, lost = hosts[0]["metadata"]["name"], hosts[1]["metadata"]["name"]
    pod_path = f"/api/v1/namespaces/{ns}/pods"
    world.call(
        "PATCH",
        f"{pod_path}/{held}",
        {"metadata": {"finalizers": [HOLD]}},
        "application/merge-patch+json",
    )
    world.call("DELETE", f"{pod_path}/{lost}")
    # The operator has taken the slice down whole; its replacement waits for the index.
    world.wait("the slice terminating", lambda: not world.live_names(ns, "lost", "tpu"))
    for _ in range(3):
        assert replicas_after_a_pass() == 1
        assert not world.live_names(ns, "lost", "tpu")

    world.call(
        "PATCH",
        f"{pod_path}/{held}",
        {"metadata": {"finalizers": None}},
        "application/merge-patch+json",
    )
    back = world.wait_slices(ns, "lost", "tpu", HOSTS, 1, running=True)
    assert list(back) == [0]
    assert held not in {p["metadata"]["name"] for p in back[0]}
    assert replicas_after_a_pass() == 1
    indices = {kit.labels(p)[kit.REPLICA_INDEX] for p in kit.workers(world.pods(ns, "lost"), "tpu")}
    assert indices == {"0"}
