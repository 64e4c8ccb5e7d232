"""Property: over random sequences of what happens to a RayCluster, the planner keeps its rules.

Events: host failures and deletions, pods held terminating by a finalizer, scale up/down,
workersToDelete (as the autoscaler writes it), suspend and resume at any moment, head
failures, and operator restarts (a fresh planner that knows only the stored status, or one
that crashed after its writes but before its status write). After every pass:

- never two running heads (a replacement waits until the old head pod is gone);
- never a healthy slice deleted except by scale-down, workersToDelete or suspension;
- replica indices unique: no two slices of a group carry one index while any of their pods
  exists;
- suspension is one-way: while ``RayClusterSuspending`` is True nothing is created.

Finally, with the finalizers released, the cluster converges to the spec.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from raycluster_operator.api import labels
from raycluster_operator.api.models import RayClusterStatus, load_cluster
from raycluster_operator.planning import ClusterPlan
from raycluster_operator.planning.desired import desired_slices
from raycluster_operator.planning.pods import read_pod
from raycluster_operator.planning.reasons import DeleteReason
from raycluster_operator.planning.replicas import sort_into_replicas

from .cluster import Loop, cluster_obj, worker_group
from .world import World, stamp, suffixes

GROUPS = ("alpha", "beta")
ASKED_FOR = {
    DeleteReason.SCALE_DOWN,
    DeleteReason.WORKERS_TO_DELETE,
    DeleteReason.CLUSTER_SUSPENDED,
    DeleteReason.GROUP_SUSPENDED,
}

EVENTS = st.one_of(
    st.tuples(st.just("step")),
    st.tuples(st.just("step")),
    st.tuples(st.just("fail"), st.integers(0, 999)),
    st.tuples(st.just("kill"), st.integers(0, 999)),
    st.tuples(st.just("hold"), st.integers(0, 999)),
    st.tuples(st.just("release")),
    st.tuples(st.just("scale"), st.sampled_from(GROUPS), st.integers(0, 3)),
    st.tuples(st.just("wtd"), st.sampled_from(GROUPS), st.integers(0, 999)),
    st.tuples(st.just("suspend"), st.booleans()),
    st.tuples(st.just("suspend_group"), st.sampled_from(GROUPS), st.booleans()),
    st.tuples(st.just("head_fail")),
    st.tuples(st.just("restart")),
    st.tuples(st.just("crash")),
)


def labels_of(pod: dict[str, Any]) -> dict[str, str]:
    return dict(pod["metadata"]["labels"])


def running_heads(world: World) -> list[str]:
    """Head pods whose containers may still run: any not Failed/Succeeded, terminating too."""
    return [
        name
        for name, pod in world.pods.items()
        if labels_of(pod).get(labels.NODE_TYPE) == "head"
        and pod["status"]["phase"] not in ("Failed", "Succeeded")
    ]


def check_world(world: World) -> None:
    assert len(running_heads(world)) <= 1, f"two heads: {running_heads(world)}"
    owners: dict[tuple[str, str], set[str]] = defaultdict(set)
    for pod in world.pods.values():
        lab = labels_of(pod)
        if lab.get(labels.NODE_TYPE) == "worker" and labels.REPLICA_INDEX in lab:
            owner = lab.get(labels.REPLICA_NAME) or pod["metadata"]["name"]
            owners[(lab[labels.GROUP], lab[labels.REPLICA_INDEX])].add(owner)
    for (group, index), names in owners.items():
        assert len(names) == 1, f"group {group} index {index} held by {sorted(names)}"


def healthy(world: World, hosts: dict[str, int]) -> dict[str, set[str]]:
    """Pod names of every complete, running slice, by replica name."""
    out: dict[str, set[str]] = {}
    for group, n in hosts.items():
        views = [
            read_pod(p) for p in world.pods.values() if labels_of(p).get(labels.GROUP) == group
        ]
        for replica in sort_into_replicas(views, n).replicas:
            if replica.complete and all(p.running for p in replica.pods):
                out[replica.key] = {p.name for p in replica.pods}
    return out


def suspending(loop: Loop) -> bool:
    status = loop.cluster.status
    return any(
        c.type == "RayClusterSuspending" and c.status == "True"
        for c in (status.conditions if status and status.conditions else ())
    )


def pick(world: World, number: int, *, node_type: str = "worker") -> str | None:
    names = sorted(
        n
        for n, p in world.pods.items()
        if labels_of(p).get(labels.NODE_TYPE) == node_type
        and not p["metadata"].get("deletionTimestamp")
    )
    return names[number % len(names)] if names else None


def check_plan(loop: Loop, plan: ClusterPlan, hosts: dict[str, int]) -> None:
    reasons = {d.name: d.reason for d in plan.deletes}
    for key, members in healthy(loop.world, hosts).items():
        for name in members & reasons.keys():
            assert reasons[name] in ASKED_FOR, f"healthy slice {key} deleted: {reasons[name]}"
    if suspending(loop) and loop.world.pods:
        assert not plan.creates, "created a pod while the cluster was still suspending"


@settings(max_examples=120, deadline=None)
@given(
    hosts=st.tuples(st.integers(2, 3), st.integers(1, 2)),
    replicas=st.tuples(st.integers(0, 3), st.integers(0, 2)),
    autoscaling=st.booleans(),
    events=st.lists(EVENTS, max_size=30),
)
def test_random_event_sequences_keep_the_rules(
    hosts: tuple[int, int],
    replicas: tuple[int, int],
    autoscaling: bool,
    events: list[tuple[Any, ...]],
) -> None:
    obj = cluster_obj(
        worker_group("alpha", numOfHosts=hosts[0], replicas=replicas[0]),
        worker_group("beta", numOfHosts=hosts[1], replicas=replicas[1]),
        enableInTreeAutoscaling=autoscaling,
    )
    group_hosts = dict(zip(GROUPS, hosts, strict=True))
    loop = Loop(load_cluster(obj), World())
    world = loop.world

    def respec() -> None:
        loop.respec(copy.deepcopy(obj))

    def step(*, store_status: bool = True) -> None:
        plan = loop.plan()
        check_plan(loop, plan, group_hosts)
        if store_status:
            loop.apply(plan)
        else:  # crashed after the writes, before the status write
            world.step([d.name for d in plan.deletes], manifests=[c.manifest for c in plan.creates])
        check_world(world)

    step()
    for event in events:
        kind = event[0]
        groups = obj["spec"]["workerGroupSpecs"]
        if kind == "step":
            step()
        elif kind in ("fail", "kill", "hold"):
            name = pick(world, event[1])
            if name is None:
                continue
            pod = world.pods[name]
            if kind == "fail":
                pod["status"]["phase"] = "Failed"
            elif kind == "kill":
                pod["metadata"]["deletionTimestamp"] = stamp(world.clock + 30)
            else:
                world.held.add(name)
        elif kind == "release":
            world.held.clear()
        elif kind == "scale":
            group = groups[GROUPS.index(event[1])]
            group["replicas"] = event[2]
            group.pop("scaleStrategy", None)
            respec()
        elif kind == "wtd":
            group = groups[GROUPS.index(event[1])]
            named = [
                n
                for n, p in sorted(world.pods.items())
                if labels_of(p).get(labels.GROUP) == event[1]
            ]
            if not named:
                continue
            group["replicas"] = max(group.get("replicas", 0) - 1, 0)
            group["scaleStrategy"] = {"workersToDelete": [named[event[2] % len(named)]]}
            respec()
        elif kind == "suspend":
            obj["spec"]["suspend"] = event[1]
            respec()
        elif kind == "suspend_group":
            groups[GROUPS.index(event[1])]["suspend"] = event[2]
            respec()
        elif kind == "head_fail":
            name = pick(world, 0, node_type="head")
            if name is not None:
                world.pods[name]["status"]["phase"] = "Failed"
        elif kind == "restart":
            # A new operator process: nothing but the stored status and the cluster's pods.
            status = loop.cluster.status
            loop = Loop(load_cluster(copy.deepcopy(obj)), world)
            loop.cluster.status = status
            loop.suffix = suffixes(start=world.serial * 1000)
        elif kind == "crash":
            step(store_status=False)

    world.held.clear()
    settled = loop.settle(max_steps=12)
    check_world(world)
    loop.cluster.status = RayClusterStatus.model_validate(settled.status)
    suspended = bool(obj["spec"].get("suspend"))
    heads = [p for p in world.pods.values() if labels_of(p).get(labels.NODE_TYPE) == "head"]
    assert len(heads) == (0 if suspended else 1)
    scale_down = not autoscaling
    for group in loop.cluster.spec.worker_group_specs:
        want = desired_slices(group, cluster_suspended=suspended)
        names = {
            labels_of(p).get(labels.REPLICA_NAME) or p["metadata"]["name"]
            for p in world.pods.values()
            if labels_of(p).get(labels.GROUP) == group.group_name
        }
        if suspended or group.suspend:
            assert not names
        elif scale_down:
            assert len(names) == want
        else:  # autoscaling on: lowering replicas alone deletes nothing
            assert len(names) >= want
