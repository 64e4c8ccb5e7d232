"""The hardening tests' world: a dev cluster, operators that can be crashed, and a checker that
watches the cluster the whole time and records every broken invariant.

Invariants (docs/design.md §4, §7), checked on every snapshot the checker sees:
- no two slices of a group share a replica index while any pod of the older one still exists
  (which also means no two *live* slices share one);
- every pod the operator made is controlled by a RayCluster;
- a RayCluster's spec only ever holds what the test itself wrote (the operator never writes
  spec), and its status.observedGeneration never goes backwards.
At the end (``converged``): exactly the desired slices per group, each complete (hosts
0..N-1, one replica name per index), all ready, nothing terminating, no pod without an owner.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from raycluster_operator.controller.manager import ManagerOptions
from raycluster_operator.kube import PODS, RAYCLUSTERS, Gone, KubeClient, KubeError

from . import manifests as m
from .objects import Obj
from .operator import FAST, FAST_LEASE, RunningOperator, operator_options
from .pods import CLUSTER, GROUP, is_ready, labels
from .pods import HOST_INDEX as HOST
from .pods import REPLICA_INDEX as INDEX
from .pods import REPLICA_NAME as NAME
from .waiting import eventually
from .world import DevWorld, open_world

__all__ = ["FAST_LEASE", "RunningOperator", "eventually", "is_ready"]

TIMINGS: dict[str, Any] = dict(
    FAST, resync_period=5.0, expectations_timeout=5.0, retry_max_delay=0.5, identity="hardening"
)


def fast_options(**overrides: Any) -> ManagerOptions:
    return operator_options(**{**TIMINGS, **overrides})


def desired_slices(group: Obj) -> int:
    if group.get("suspend"):
        return 0
    low = int(group.get("minReplicas") or 0)
    high = group.get("maxReplicas")
    want = max(int(group.get("replicas") if group.get("replicas") is not None else low), low)
    return want if high is None else min(want, int(high))


@dataclass
class Checker:
    """Watches pods and RayClusters; records violations."""

    kube: KubeClient
    violations: list[str] = field(default_factory=list)
    snapshots: int = 0
    events: int = 0
    #: (namespace/name, generation) -> canonical spec JSON the test wrote.
    written: dict[tuple[str, int], str] = field(default_factory=dict)
    seen_specs: list[tuple[str, int, str]] = field(default_factory=list)
    observed_gen: dict[str, int] = field(default_factory=dict)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def note_write(self, obj: Obj) -> None:
        meta = obj["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        self.written[(key, int(meta.get("generation") or 0))] = _canon(obj.get("spec"))

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._watch_pods(), name="checker pods"),
            asyncio.create_task(self._watch_clusters(), name="checker watch"),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _violation(self, text: str) -> None:
        if text not in self.violations:
            self.violations.append(text)

    async def _watch_pods(self) -> None:
        """Every state of the operator's pods, one per watch event, each checked whole: the
        cache after an event is the server's state at that resourceVersion. (It polled a list
        every 30 ms: states between two lists went unseen, and the lists cost the hardening
        tests a third of their CPU.)"""
        pods: dict[str, Obj] = {}
        rv = ""
        while True:
            try:
                if not rv:
                    listing = await self.kube.list(PODS, None, label_selector=CLUSTER)
                    pods = {_key(pod): pod for pod in listing.items}
                    self._check_snapshot(pods)
                    rv = listing.resource_version
                async for etype, obj in self.kube.watch(
                    PODS, resource_version=rv, label_selector=CLUSTER, timeout_seconds=30
                ):
                    rv = obj.get("metadata", {}).get("resourceVersion") or rv
                    if etype == "DELETED":
                        pods.pop(_key(obj), None)
                    elif etype in ("ADDED", "MODIFIED"):
                        pods[_key(obj)] = obj
                    else:
                        continue
                    self._check_snapshot(pods)
            except Gone:
                rv = ""
            except KubeError:
                await asyncio.sleep(0.05)

    def _check_snapshot(self, pods: dict[str, Obj]) -> None:
        self.check_pods(list(pods.values()))
        self.snapshots += 1

    def check_pods(self, pods: list[Obj]) -> None:
        owners: dict[tuple[str, str, str, int], set[str]] = {}
        for pod in pods:
            lbl = labels(pod)
            meta = pod["metadata"]
            refs = [r for r in meta.get("ownerReferences") or [] if r.get("controller")]
            if lbl.get("app.kubernetes.io/created-by") and not any(
                r.get("kind") == "RayCluster" for r in refs
            ):
                self._violation(f"pod {meta['name']} has no RayCluster controller")
            if lbl.get("ray.io/node-type") != "worker" or INDEX not in lbl:
                continue
            key = (meta["namespace"], lbl[CLUSTER], lbl.get(GROUP, ""), int(lbl[INDEX]))
            owners.setdefault(key, set()).add(lbl.get(NAME) or meta["name"])
        for (ns, cluster, group, index), names in owners.items():
            if len(names) > 1:
                self._violation(
                    f"{ns}/{cluster} group {group}: index {index} held by slices {sorted(names)}"
                )

    async def _watch_clusters(self) -> None:
        rv = ""
        while True:
            try:
                if not rv:
                    listing = await self.kube.list(RAYCLUSTERS)
                    for obj in listing.items:
                        self.check_cluster(obj)
                    rv = listing.resource_version
                async for etype, obj in self.kube.watch(
                    RAYCLUSTERS, resource_version=rv, timeout_seconds=30
                ):
                    rv = obj.get("metadata", {}).get("resourceVersion") or rv
                    if etype in ("ADDED", "MODIFIED"):
                        self.events += 1
                        self.check_cluster(obj)
            except Gone:
                rv = ""
            except KubeError:
                await asyncio.sleep(0.05)

    def check_cluster(self, obj: Obj) -> None:
        meta = obj["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        self.seen_specs.append((key, int(meta.get("generation") or 0), _canon(obj.get("spec"))))
        observed = (obj.get("status") or {}).get("observedGeneration")
        if isinstance(observed, int):
            if observed < self.observed_gen.get(key, 0):
                self._violation(f"{key}: status.observedGeneration went back to {observed}")
            self.observed_gen[key] = max(observed, self.observed_gen.get(key, 0))
            if observed > int(meta.get("generation") or 0):
                self._violation(f"{key}: observedGeneration {observed} ahead of the spec")
            if observed == meta.get("generation"):
                self._check_desired(key, obj)

    def _check_desired(self, key: str, obj: Obj) -> None:
        """A status of the current generation counts the pods that generation asks for."""
        status = obj.get("status") or {}
        if any(
            c.get("type") == "InvalidSpec" and c.get("status") == "True"
            for c in status.get("conditions") or []
        ):
            return
        spec = obj.get("spec") or {}
        try:
            want = sum(
                desired_slices(g) * int(g.get("numOfHosts") or 1)
                for g in spec.get("workerGroupSpecs") or []
            )
        except (TypeError, ValueError, AttributeError):
            return
        if spec.get("suspend") is True:
            want = 0
        got = status.get("desiredWorkerReplicas")
        if got is not None and got != want:
            self._violation(f"{key}: status.desiredWorkerReplicas {got}, the spec wants {want}")

    def spec_violations(self) -> list[str]:
        """Every spec seen must be one the test wrote, at the generation it got."""
        out = []
        for key, generation, spec in self.seen_specs:
            wrote = self.written.get((key, generation))
            if wrote is None:
                out.append(f"{key}: generation {generation} was not written by the test")
            elif wrote != spec:
                out.append(f"{key}: spec at generation {generation} differs from the test's")
        return out


def _key(obj: Obj) -> str:
    return f"{obj['metadata'].get('namespace')}/{obj['metadata']['name']}"


def _canon(value: object) -> str:
    return json.dumps(value, sort_keys=True)


@dataclass
class World(DevWorld):
    """The checker watches from the moment the cluster is up; teardown crashes operators."""

    #: The operator's kubeconfig: its ServiceAccount with exactly deploy/'s RBAC.
    operator_config: Obj = field(default_factory=dict)
    checker: Checker = field(init=False)

    operator_defaults: ClassVar[dict[str, Any]] = TIMINGS
    sync_within: ClassVar[float] = 20.0
    crash_on_close: ClassVar[bool] = True

    def __post_init__(self) -> None:
        self.checker = Checker(self.kube)

    async def opened(self) -> None:
        self.operator_config = await self.operator_kubeconfig()
        self.checker.start()

    async def close(self) -> None:
        await self.checker.stop()
        await super().close()

    def client(self) -> KubeClient:
        """A client acting as the operator's ServiceAccount (RBAC enforced as deployed)."""
        return KubeClient.from_kubeconfig(self.operator_config)

    async def create(self, obj: Obj) -> Obj:
        created = await self.cluster.apply(obj)
        self.checker.note_write(created)
        return created

    async def set_group(
        self, name: str, group_name: str, ns: str = "default", **changes: Any
    ) -> Obj:
        """Change one worker group the way the autoscaler does: a JSON merge of the whole list
        (retried on 409, the test's own optimistic concurrency)."""
        while True:
            current = await self.kube.get(RAYCLUSTERS, ns, name)
            groups = current["spec"]["workerGroupSpecs"]
            for group in groups:
                if group["groupName"] == group_name:
                    group.update(changes)
            current["spec"]["workerGroupSpecs"] = groups
            try:
                updated = await self.kube.replace(RAYCLUSTERS, current)
            except KubeError as exc:
                if exc.code in (409, 429, 500):
                    await asyncio.sleep(0.05)
                    continue
                raise
            self.checker.note_write(updated)
            return updated

    async def pods(self, cluster: str, ns: str = "default", *, live: bool = False) -> list[Obj]:
        return await super().pods(cluster, ns, live=live)

    async def converged(self, name: str, ns: str = "default") -> None:
        """Raises AssertionError until the cluster is exactly what its spec asks for."""
        obj = await self.kube.get(RAYCLUSTERS, ns, name)
        pods = await self.pods(name, ns)
        terminating = [
            (p["metadata"]["name"], p["spec"].get("nodeName"), (p.get("status") or {}).get("phase"))
            for p in pods
            if p["metadata"].get("deletionTimestamp")
        ]
        assert not terminating, f"terminating: {terminating}"
        assert all(is_ready(p) for p in pods), "not ready"
        total = 1
        for group in obj["spec"].get("workerGroupSpecs") or []:
            hosts = int(group.get("numOfHosts") or 1)
            want = desired_slices(group)
            total += want * hosts
            mine = [
                p
                for p in pods
                if labels(p).get(GROUP) == group["groupName"]
                and labels(p).get("ray.io/node-type") == "worker"
            ]
            by_index: dict[int, list[Obj]] = {}
            for pod in mine:
                by_index.setdefault(int(labels(pod)[INDEX]), []).append(pod)
            assert len(by_index) == want, (group["groupName"], sorted(by_index), want)
            for index, members in by_index.items():
                if hosts > 1:
                    hosts_seen = sorted(int(labels(p)[HOST]) for p in members)
                    assert hosts_seen == list(range(hosts)), (index, hosts_seen)
                    assert len({labels(p)[NAME] for p in members}) == 1
                else:
                    assert len(members) == 1
        assert len(pods) == total, (len(pods), total)
        status = obj.get("status") or {}
        assert status.get("observedGeneration") == obj["metadata"]["generation"]
        assert status.get("state") == "ready", status.get("state")
        assert status.get("readyWorkerReplicas") == total - 1
        assert status.get("desiredWorkerReplicas") == total - 1

    async def orphans(self) -> list[str]:
        """Pods labelled for a RayCluster that no existing RayCluster controls."""
        uids = {c["metadata"]["uid"] for c in (await self.kube.list(RAYCLUSTERS)).items}
        out = []
        for pod in (await self.kube.list(PODS, None, label_selector=CLUSTER)).items:
            refs = pod["metadata"].get("ownerReferences") or []
            if not any(r.get("uid") in uids for r in refs):
                out.append(pod["metadata"]["name"])
        return out


@contextlib.asynccontextmanager
async def world(nodes: list[str], **cluster_args: Any) -> AsyncIterator[World]:
    async with open_world(World, nodes, **cluster_args) as w:
        yield w


def _container(name: str, **resources: str) -> Obj:
    req = {"cpu": "10m", "memory": "16Mi", **resources}
    return m.container(name, requests=req, limits=req)


def raycluster(name: str, groups: list[Obj], ns: str = "default") -> Obj:
    return m.raycluster(name, m.head_group(_container("ray-head")), groups, namespace=ns)


def cpu_group(name: str, replicas: int, hosts: int = 1) -> Obj:
    pod = m.template(_container("ray-worker"))
    return m.worker_group(name, pod, replicas=replicas, hosts=hosts)


def tpu_group(name: str, replicas: int) -> Obj:
    pod = m.template(
        _container("ray-worker", **{"google.com/tpu": "4"}),
        nodeSelector=dict(m.V6E_4X4),
        # As autoscaler v2 sets it: a host whose Ray exits is failed, not restarted.
        restartPolicy="Never",
    )
    return m.worker_group(name, pod, replicas=replicas, min_replicas=0, max_replicas=4, hosts=4)
