"""Planned disruptions in the pure planner (planning/features/disruption.py, docs/design.md §4 rule
12b), as a property: for random cordons, taints, uncordons and drain evictions against random
spare capacity, a simulated cluster (a gang scheduler over node pools, kube's eviction API over
the operator's per-slice budgets) driven by ``plan_pass`` never leaves a slice partially
evicted, and never has fewer than replicas - maxUnavailable ready slices once it had them all.
Plus the reading of nodes, one example at a time."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from raycluster_operator.api import labels
from raycluster_operator.planning import ClusterState, PlanOptions, plan_pass
from raycluster_operator.planning.features.disruption import (
    AUTOSCALER_TAINT,
    MAINTENANCE_LABEL,
    TERMINATION_TAINT,
    node_disruption,
)
from raycluster_operator.planning.reasons import DeleteReason
from tests.harness.objects import Obj

from .cluster import cluster_obj, worker_group
from .world import BASE, make_pod, stamp, suffixes

HOSTS = 2
NOW = BASE + timedelta(seconds=5000)
OPTIONS = PlanOptions(unready_slice_timeout=60.0, slice_backoff_base=0.0)


def node(name: str, **spec: Any) -> Obj:
    return {
        "metadata": {"name": name, "labels": {}},
        "spec": dict(spec),
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def test_a_node_reads_disrupted_by_cordon_taints_and_a_maintenance_inside_the_window() -> None:
    assert node_disruption(node("a"), NOW, 1800) == (None, None)
    cordoned, _ = node_disruption(node("a", unschedulable=True), NOW, 1800)
    assert cordoned is not None and cordoned.cause is DeleteReason.NODE_DRAIN
    for key, cause in (
        (AUTOSCALER_TAINT, DeleteReason.NODE_SCALE_DOWN),
        (TERMINATION_TAINT, DeleteReason.NODE_TERMINATION),
    ):
        tainted, _ = node_disruption(
            node("a", taints=[{"key": key, "effect": "NoSchedule"}]), NOW, 1
        )
        assert tainted is not None and tainted.cause is cause
    later = node("a")
    at = int((NOW + timedelta(hours=1)).timestamp())
    later["metadata"]["labels"][MAINTENANCE_LABEL] = str(at)
    found, again = node_disruption(later, NOW, 1800)
    assert found is None and again == 1800.0  # the window opens in 30 minutes
    found, again = node_disruption(later, NOW, 3600)
    assert found is not None and found.cause is DeleteReason.HOST_MAINTENANCE
    assert found.deadline is not None and int(found.deadline.timestamp()) == at
    assert again == 3600.0  # and look again at the maintenance time


@dataclass
class Sim:
    """A small cluster: pools of HOSTS nodes, one slice per pool (the gang scheduler's rule)."""

    desired: int
    max_unavailable: int
    pools: int
    nodes: dict[str, Obj] = field(default_factory=dict)
    pods: dict[str, Obj] = field(default_factory=dict)
    budgets: dict[str, Obj] = field(default_factory=dict)
    serial: int = 0
    clock: int = 0
    last: Any = None
    #: Nodes a kubectl drain is running on: it retries the eviction of their pods each step.
    draining: set[str] = field(default_factory=set)
    #: A namespace ResourceQuota on `pods` (the head, never made here, is charged too).
    pod_quota: int | None = None

    def __post_init__(self) -> None:
        for p in range(self.pools):
            for h in range(HOSTS):
                self.nodes[f"pool{p}-{h}"] = node(f"pool{p}-{h}")
        self.spec = cluster_obj(
            worker_group(
                replicas=self.desired,
                numOfHosts=HOSTS,
                maxUnavailable=self.max_unavailable,
            )
        )
        self.suffix = suffixes()

    # -- the cluster ----------------------------------------------------------------------
    def slices(self) -> dict[str, list[Obj]]:
        out: dict[str, list[Obj]] = {}
        for pod in self.pods.values():
            name = pod["metadata"]["labels"].get(labels.REPLICA_NAME)
            if name:
                out.setdefault(name, []).append(pod)
        return out

    def ready(self) -> int:
        return sum(
            1
            for members in self.slices().values()
            if len(members) == HOSTS and all(_ready(p) for p in members)
        )

    def schedule(self) -> None:
        """Place every unplaced slice whole in a free pool it may use, else mark it
        unschedulable (PodScheduled=False)."""
        used = {
            p["spec"].get("nodeName", "")[:-2]
            for p in self.pods.values()
            if p["spec"].get("nodeName")
        }
        for members in self.slices().values():
            waiting = [p for p in members if not p["spec"].get("nodeName")]
            if not waiting:
                continue
            avoid = _avoided(waiting[0])
            pool = next(
                (
                    f"pool{i}"
                    for i in range(self.pools)
                    if f"pool{i}" not in used
                    and all(
                        _schedulable(self.nodes[f"pool{i}-{h}"]) and f"pool{i}-{h}" not in avoid
                        for h in range(HOSTS)
                    )
                ),
                None,
            )
            for pod in waiting:
                if pool is None:
                    pod["status"] = {
                        "phase": "Pending",
                        "conditions": [{"type": "PodScheduled", "status": "False"}],
                    }
                    continue
                host = pod["metadata"]["labels"][labels.HOST_INDEX]
                pod["spec"]["nodeName"] = f"{pool}-{host}"
                pod["status"] = {
                    "phase": "Running",
                    "conditions": [
                        {"type": "PodScheduled", "status": "True"},
                        {"type": "Ready", "status": "True"},
                    ],
                }
            if pool is not None:
                used.add(pool)

    def drains(self) -> None:
        """Each running drain retries the eviction of every pod on its node."""
        for _, pod in sorted(self.pods.items()):
            if pod["spec"].get("nodeName") in self.draining:
                self.evict_pod(pod)

    def evict(self, choice: int) -> None:
        """kube's eviction API over the operator's budgets: a Running pod of a slice with a
        budget (minAvailable = hosts, every host Ready) is refused; otherwise it terminates
        with DisruptionTarget."""
        running = sorted(
            n
            for n, p in self.pods.items()
            if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
        )
        if not running:
            return
        self.evict_pod(self.pods[running[choice % len(running)]])

    def evict_pod(self, pod: Obj) -> None:
        if pod["metadata"].get("deletionTimestamp"):
            return
        replica = pod["metadata"]["labels"][labels.REPLICA_NAME]
        if any(
            b["spec"]["selector"]["matchLabels"][labels.REPLICA_NAME] == replica
            for b in self.budgets.values()
        ):
            return
        pod["metadata"]["deletionTimestamp"] = stamp(self.clock)
        pod["status"]["conditions"].append({"type": "DisruptionTarget", "status": "True"})

    # -- the operator ---------------------------------------------------------------------
    def reconcile(self) -> None:
        self.clock += 1
        for name in [n for n, p in self.pods.items() if p["metadata"].get("deletionTimestamp")]:
            pod = self.pods[name]
            if pod.get("_seen"):
                del self.pods[name]  # gone one step after it started terminating
            else:
                pod["_seen"] = True
        objects: dict[str, list[Obj]] = {"PodDisruptionBudget": list(self.budgets.values())}
        if self.pod_quota is not None:
            hard = {"pods": str(self.pod_quota)}
            used = {"pods": str(len(self.pods))}
            meta = {"name": "q", "namespace": "default"}
            objects["ResourceQuota"] = [
                {"metadata": meta, "spec": {"hard": hard}, "status": {"hard": hard, "used": used}}
            ]
        state = ClusterState(
            self.spec,
            list(self.pods.values()),
            nodes=self.nodes,
            objects=objects,
            present=frozenset(("PodDisruptionBudget", n) for n in self.budgets),
        )
        plan = plan_pass(state, now=NOW, new_suffix=self.suffix, options=OPTIONS)
        self.last = plan
        if plan.status is not None:
            self.spec["status"] = plan.status  # what the next pass reads back
        for delete in plan.deletes:
            self.pods[delete.name]["metadata"]["deletionTimestamp"] = stamp(self.clock)
        for create in plan.creates:
            if create.group == labels.HEAD_GROUP:
                continue
            self.serial += 1
            name = f"w{self.serial}"
            pod = make_pod(
                name,
                replica_index=create.replica_index,
                replica_name=create.replica_name,
                host_index=create.host_index,
                state="pending",
                created=self.clock,
            )
            pod["spec"] = dict(create.manifest["spec"])
            pod["status"] = {"phase": "Pending", "conditions": []}
            self.pods[name] = pod
        for obj in plan.objects:
            if obj["kind"] == "PodDisruptionBudget":
                self.budgets[obj["metadata"]["name"]] = obj
        for _, name in plan.object_deletes:
            self.budgets.pop(name, None)
        self.check_whole()

    def check_whole(self) -> None:
        """No slice runs with a host missing: after each pass, a slice is all terminating or
        not at all, and never short of a host."""
        for name, members in self.slices().items():
            going = [p for p in members if p["metadata"].get("deletionTimestamp")]
            assert not going or len(going) == len(members), (name, len(going), len(members))


def _ready(pod: Obj) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in pod["status"].get("conditions") or []
    )


def _schedulable(obj: Obj) -> bool:
    spec = obj["spec"]
    return not spec.get("unschedulable") and not any(
        t.get("effect") == "NoSchedule" for t in spec.get("taints") or []
    )


def _avoided(pod: Obj) -> set[str]:
    required = ((pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    out: set[str] = set()
    for term in required.get("nodeSelectorTerms") or []:
        for expr in term.get("matchExpressions") or []:
            if expr["key"] == "kubernetes.io/hostname" and expr["operator"] == "NotIn":
                out |= set(expr["values"])
    return out


EVENTS = st.lists(
    st.tuples(
        st.sampled_from(
            ["cordon", "uncordon", "autoscaler", "termination", "evict", "evict", "wait"]
        ),
        st.integers(min_value=0, max_value=50),
    ),
    max_size=25,
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Two slices drained at once with no room for a stand-in: only one may go (maxUnavailable 1).
@example(
    desired=2, max_unavailable=1, spare=0, events=[("drain", 0), ("drain", 2)] + [("wait", 0)] * 4
)
@given(
    desired=st.integers(min_value=1, max_value=3),
    max_unavailable=st.integers(min_value=1, max_value=2),
    spare=st.integers(min_value=0, max_value=2),
    events=EVENTS,
)
def test_random_disruptions_never_evict_part_of_a_slice_and_keep_the_budget(
    desired: int, max_unavailable: int, spare: int, events: list[tuple[str, int]]
) -> None:
    sim = Sim(desired, max_unavailable, desired + spare)
    for _ in range(6):
        sim.reconcile()
        sim.schedule()
    assert sim.ready() == desired
    floor = desired - max_unavailable
    names = sorted(sim.nodes)
    for kind, target in events:
        obj = sim.nodes[names[target % len(names)]]
        if kind in ("cordon", "drain"):
            obj["spec"]["unschedulable"] = True
            if kind == "drain":
                sim.draining.add(obj["metadata"]["name"])
        elif kind == "uncordon":
            obj["spec"] = {}
            sim.draining.discard(obj["metadata"]["name"])
        elif kind in ("autoscaler", "termination"):
            key = AUTOSCALER_TAINT if kind == "autoscaler" else TERMINATION_TAINT
            obj["spec"]["taints"] = [{"key": key, "effect": "NoSchedule"}]
        elif kind == "evict":
            sim.evict(target)
        sim.drains()
        sim.reconcile()
        sim.schedule()
        assert sim.ready() >= floor, (kind, sim.ready(), floor)
    # Once every node is back, the group recovers its desired slices.
    sim.draining.clear()
    for obj in sim.nodes.values():
        obj["spec"] = {}
    for _ in range(8):
        sim.reconcile()
        sim.schedule()
    assert sim.ready() == desired


def test_status_names_the_disrupted_slice_and_its_release_when_no_stand_in_fits() -> None:
    sim = Sim(desired=2, max_unavailable=1, pools=2)
    for _ in range(6):
        sim.reconcile()
        sim.schedule()
    sim.nodes["pool0-1"]["spec"]["unschedulable"] = True
    sim.reconcile()  # a stand-in is created ...
    creates = [c for c in sim.last.creates if c.group == "workers"]
    assert {c.reason.value for c in creates} == {"SliceMove"} and len(creates) == HOSTS
    sim.schedule()  # ... and finds no pool
    sim.reconcile()
    status = sim.last.status
    assert status is not None
    (entry,) = status["workerGroups"][0]["disruptedSlices"]
    assert entry["reason"] == "NodeDrain" and entry["node"] == "pool0-1"
    assert entry["budgetReleased"] is True and "cordoned" in entry["message"]
    assert ("PodDisruptionBudget", f"demo-{entry['slice']}") in sim.last.object_deletes


def test_two_drains_at_once_with_room_complete_one_slice_at_a_time() -> None:
    """maxUnavailable 1 caps the stand-ins at one while two slices are drained: the first
    disrupted slice goes once that stand-in is ready, then the second gets its own, and both
    drains complete with the group at D ready slices throughout (no drain waits on the other)."""
    sim = Sim(desired=2, max_unavailable=1, pools=4)
    for _ in range(6):
        sim.reconcile()
        sim.schedule()
    for name in ("pool0-0", "pool1-0"):
        sim.nodes[name]["spec"]["unschedulable"] = True
        sim.draining.add(name)
    for _ in range(8):
        sim.drains()
        sim.reconcile()
        sim.schedule()
        assert sim.ready() >= 2
        assert len(sim.slices()) <= 2 + 1 + 1  # D + one stand-in + one slice terminating
    left = [p for p in sim.pods.values() if p["spec"].get("nodeName") in sim.draining]
    assert not left and sim.ready() == 2


def test_a_drain_where_the_quota_has_no_room_for_a_stand_in_completes() -> None:
    """Nodes to spare, but the namespace's quota holds the two slices and no more (rule 13c):
    the stand-in waits for quota, which is no room too, so the slice's budget is released the
    next pass and the drain takes it whole; the stand-in follows once its pods are gone."""
    sim = Sim(desired=2, max_unavailable=1, pools=3, pod_quota=2 * HOSTS + 1)
    for _ in range(6):
        sim.reconcile()
        sim.schedule()
    assert sim.ready() == 2
    sim.nodes["pool0-1"]["spec"]["unschedulable"] = True
    sim.draining.add("pool0-1")
    sim.reconcile()  # the stand-in waits for quota
    assert not [c for c in sim.last.creates if c.group == "workers"]
    assert sim.last.status["workerGroups"][0]["quotaWaiting"] == [2]
    for _ in range(6):
        sim.drains()
        sim.reconcile()
        sim.schedule()
        assert sim.ready() >= 1
    left = [p for p in sim.pods.values() if p["spec"].get("nodeName") in sim.draining]
    assert not left and sim.ready() == 2
