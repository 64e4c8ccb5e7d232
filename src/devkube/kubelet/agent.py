"""The fake kubelet: one for every simulated node, acting only through the API.

For each pod bound to a node it assigns a pod IP from the node's range, reports the pod
Pending (containers creating), asks the runtime to start the containers, and reports them
Running and Ready as the runtime says so. It finishes graceful deletion (after the pod's grace
period, capped short), applies the restart policy when a container exits, heartbeats for every
node (`heartbeat.Heartbeats`), and simulates faults: `fail_pod` makes containers exit,
`fail_node` makes a node's kubelet report NotReady, its pods unready and then Failed with
reason NodeLost.

A pod's readiness probe is made to fail, with kubectl alone, by the pod annotation
`dev.raycluster-operator.io/ready=false` (removing it, or any other value, lets it pass again):
its containers keep running but are not ready, so the pod is Running and not Ready, from the
start (in the template) or from the moment it is annotated.

A node's kubelet is stopped, as a user does it with kubectl alone, by the node annotation
`dev.raycluster-operator.io/kubelet=stopped` (`=running`, or removing it, starts it again).
A stopped kubelet is a partitioned node: it sends no heartbeat and writes nothing (no pod
status, no finished deletions, no new pods started), while the containers it runs keep running
and restarting as before. Back, it posts the node Ready, rewrites every pod's status, starts
the pods bound meanwhile and finishes the deletions that waited. A pod removed from the API
while the kubelet is stopped (force-deleted, or by the pod garbage collector) has its
containers stopped at once: the dev cluster does not keep orphaned processes alive.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import ipaddress
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from devkube.kubelet.containerlogs import ContainerLogs
from devkube.kubelet.dra import KubeletPlugin, PrepareError, prepare_pod
from devkube.kubelet.heartbeat import Heartbeats
from devkube.kubelet.podstatus import (
    ContainerRecord,
    PodRecord,
    qos_class,
    render_status,
)
from devkube.kubelet.runtime import Runtime
from devkube.machinery.client import ApiClient, ApiError, WatchEvent, resource_path
from devkube.machinery.informer import Informer
from devkube.machinery.pods import TERMINAL_PHASES
from devkube.streaming.logs import LogRequest, LogUnavailable
from kubefacts.timestamps import now_rfc3339

log = logging.getLogger(__name__)

KUBELET_ANNOTATION = "dev.raycluster-operator.io/kubelet"
#: Pod annotation: "false" makes every readiness probe of the pod fail.
READY_ANNOTATION = "dev.raycluster-operator.io/ready"
STOPPED = "stopped"


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    return meta


def _probe_failing(pod: Mapping[str, Any]) -> bool:
    return (_meta(pod).get("annotations") or {}).get(READY_ANNOTATION) == "false"


def node_internal_ip(node: Mapping[str, Any]) -> str:
    for address in (node.get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP":
            return str(address.get("address"))
    return "127.0.0.1"


class _IpPool:
    """The free pod IPs of one node's podCIDR, lowest first. Addresses are handed out in order
    and returned ones are taken first, so a node's pool costs nothing until its pods come and
    each take or give is O(log n) (issue #26: a list of every address of every node's range,
    built on its first pod, was 11.5% of the dev server while 400 clusters converged)."""

    def __init__(self, cidr: str) -> None:
        network = ipaddress.ip_network(cidr or "10.255.0.0/24", strict=False)
        self._address = type(network.network_address)
        hosts = iter(network.hosts())
        next(hosts, None)  # the first host (.1) is the node's gateway
        second = next(hosts, None)
        last = int(network.broadcast_address)
        if network.version == 4 and network.prefixlen < 31:
            last -= 1  # the broadcast address
        # The next address never handed out, and the last of the range (none: next > last).
        self._next, self._last = (int(second), last) if second is not None else (1, 0)
        self._returned: list[int] = []

    def take(self) -> str:
        if self._returned:
            return str(self._address(heapq.heappop(self._returned)))
        if self._next > self._last:
            raise RuntimeError("pod IP range exhausted")
        self._next += 1
        return str(self._address(self._next - 1))

    def give(self, ip: str) -> None:
        heapq.heappush(self._returned, int(ipaddress.ip_address(ip)))


class Kubelet:
    def __init__(
        self,
        client: ApiClient,
        runtime: Runtime,
        *,
        termination_cap: float = 0.5,
        eviction_delay: float = 0.5,
        concurrency: int = 32,
        pods: Informer | None = None,
        nodes: Informer | None = None,
        lease_duration: float = 10.0,
        status_every: float = 60.0,
        node_clients: Callable[[str], ApiClient] | None = None,
    ) -> None:
        self._client = client
        #: The client each node's writes go through: on Kubernetes' control plane the node's
        #: own credentials (system:node:<name>), so the Node authorizer and NodeRestriction
        #: judge them as a real kubelet's; the shared watches stay the cluster's.
        self.client_for: Callable[[str], ApiClient] = node_clients or (lambda _node: client)
        self.runtime = runtime
        self.termination_cap = termination_cap
        self.eviction_delay = eviction_delay
        self.records: dict[str, PodRecord] = {}
        self._pods_by_uid: dict[str, dict[str, Any]] = {}
        self._ready_since: dict[str, tuple[bool, str]] = {}
        self._ip_pools: dict[str, _IpPool] = {}
        self._lost_nodes: set[str] = set()
        self._stopped: set[str] = set()  # nodes whose kubelet is stopped (the annotation)
        self._terminating: set[str] = set()
        self._locks: dict[str, asyncio.Lock] = {}
        self._last_write: dict[str, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._writes = asyncio.Semaphore(concurrency)
        self.logs = ContainerLogs()
        # DRA drivers' node plugins by driver name (kubelet/dra.py), registered by add-ons.
        self.plugins: dict[str, KubeletPlugin] = {}
        # Informers passed in are shared and started/stopped by their owner.
        self.nodes = nodes or Informer(client, "/api/v1/nodes")
        self.pods = pods or Informer(client, "/api/v1/pods")
        self._owns_informers = pods is None and nodes is None
        self.pods.subscribe(self._on_pod_event)
        self.nodes.subscribe(self._on_node_event)
        self.heartbeats = Heartbeats(
            self.client_for,
            self.nodes,
            self._readiness,
            lease_duration=lease_duration,
            status_every=status_every,
        )

    async def start(self) -> None:
        # Nodes first: a pod is only run once its node (IP range, address) is known.
        self.nodes.start()
        await self.nodes.synced.wait()
        self.pods.start()
        await self.pods.synced.wait()
        self.heartbeats.start()

    async def stop(self) -> None:
        await self.heartbeats.stop()
        if self._owns_informers:
            await self.pods.stop()
            await self.nodes.stop()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.runtime.close()

    def _spawn(self, coroutine: Any) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # --- watching nodes: which kubelets run ------------------------------------------------

    def _readiness(self, node: str) -> bool | None:
        """What node's kubelet reports: nothing when stopped, NotReady when failed."""
        if node in self._stopped:
            return None
        return node not in self._lost_nodes

    def _on_node_event(self, event: WatchEvent) -> None:
        items = event.object.get("items") or [] if event.type == "SYNC" else [event.object]
        if event.type == "SYNC":
            names = {str(_meta(n).get("name")) for n in items}
            self._stopped &= names
        for node in items:
            name = str(_meta(node).get("name"))
            annotations = _meta(node).get("annotations") or {}
            stopped = event.type != "DELETED" and annotations.get(KUBELET_ANNOTATION) == STOPPED
            if stopped and name not in self._stopped:
                log.info("kubelet of node %s stopped", name)
                self._stopped.add(name)
            elif not stopped and name in self._stopped:
                self._stopped.discard(name)
                if event.type != "DELETED":
                    log.info("kubelet of node %s running again", name)
                    self._resume(name)

    def _resume(self, node: str) -> None:
        """A kubelet back: heartbeat now, report every pod, catch up on what it missed."""
        self._spawn(self.heartbeats.beat(node))
        for uid, record in list(self.records.items()):
            if record.node == node:
                self._publish(uid)
        for pod in list(self.pods.cache.values()):
            if (pod.get("spec") or {}).get("nodeName") == node:
                self._observe(pod)

    # --- watching pods -------------------------------------------------------------------

    def _on_pod_event(self, event: WatchEvent) -> None:
        if event.type == "SYNC":
            live = {str(_meta(p).get("uid")) for p in event.object.get("items") or []}
            for uid in [u for u in self.records if u not in live]:
                self._forget(uid)
            for pod in event.object.get("items") or []:
                self._observe(pod)
        elif event.type == "DELETED":
            self._forget(str(_meta(event.object).get("uid")))
        else:
            self._observe(event.object)

    def _forget(self, uid: str) -> None:
        record = self.records.pop(uid, None)
        pod = self._pods_by_uid.pop(uid, None)
        self._terminating.discard(uid)
        self._ready_since.pop(uid, None)
        self._locks.pop(uid, None)
        self._last_write.pop(uid, None)
        self.logs.forget(uid)
        if record is not None:
            self._ip_pools[record.node].give(record.pod_ip)
            if pod is not None:
                self._spawn(self.runtime.stop_pod(pod, 0))

    def _observe(self, pod: dict[str, Any]) -> None:
        meta = _meta(pod)
        uid = str(meta.get("uid", ""))
        node_name = str((pod.get("spec") or {}).get("nodeName") or "")
        if node_name in self._stopped:
            return  # seen again when the kubelet is back
        if meta.get("deletionTimestamp"):
            self._terminate(pod)
            return
        if uid in self.records:
            failing = _probe_failing(pod)
            if self.records[uid].probe_failing != failing:
                self.records[uid].probe_failing = failing
                self._publish(uid)
                return
            self._reconcile_ready(uid, pod)
            return
        if not node_name:
            return
        if (pod.get("status") or {}).get("phase") in (*TERMINAL_PHASES, "Running"):
            return  # finished, or run by a kubelet before us
        node = self.nodes.cache.get(("", node_name))
        if node is None:
            log.warning(
                "pod %s/%s bound to unknown node %s",
                meta.get("namespace"),
                meta.get("name"),
                node_name,
            )
            return
        pool = self._ip_pools.get(node_name)
        if pool is None:
            pool = self._ip_pools[node_name] = _IpPool(
                str((node.get("spec") or {}).get("podCIDR", ""))
            )
        now = now_rfc3339()
        spec = pod.get("spec") or {}
        record = PodRecord(
            namespace=str(meta.get("namespace", "default")),
            name=str(meta.get("name")),
            uid=uid,
            node=node_name,
            host_ip=node_internal_ip(node),
            pod_ip=pool.take(),
            restart_policy=str(spec.get("restartPolicy") or "Always"),
            start_time=now,
            scheduled_at=now,
            containers=[
                ContainerRecord(name=str(c.get("name", "")), image=str(c.get("image", "")))
                for c in spec.get("containers") or []
            ],
            init_containers=[str(c.get("name", "")) for c in spec.get("initContainers") or []],
            node_ready=node_name not in self._lost_nodes,
            qos_class=qos_class(spec),
            probe_failing=_probe_failing(pod),
        )
        self.records[uid] = record
        self._pods_by_uid[uid] = pod
        self._publish(uid)
        if node_name in self._lost_nodes:
            self._spawn(self._evict_later([uid], node_name))
        elif (pod.get("spec") or {}).get("resourceClaims"):
            self._spawn(self._prepare_then_start(pod, record))
        else:
            self.runtime.start_pod(pod, record.pod_ip, self)

    async def _prepare_then_start(self, pod: dict[str, Any], record: PodRecord) -> None:
        """NodePrepareResources before the sandbox (kubelet/dra.py): tried again every
        second, with one Warning per new reason, until prepared or the pod is gone."""
        said = ""
        while self.records.get(record.uid) is record:
            try:
                edits = await prepare_pod(
                    self.client_for(record.node).get, self.plugins, pod, record.node
                )
            except PrepareError as error:
                if str(error) != said:
                    said = str(error)
                    await self._warn(record, "FailedPrepareDynamicResources", said)
                await asyncio.sleep(1.0)
                continue
            if self.records.get(record.uid) is not record:
                return
            devices = getattr(self.runtime, "use_devices", None)
            if devices is not None:
                devices(record.uid, edits)
            self.runtime.start_pod(pod, record.pod_ip, self)
            return

    def _reconcile_ready(self, uid: str, pod: Mapping[str, Any]) -> None:
        """Like the status manager's resync: when someone else (the node lifecycle controller)
        changed the pod's Ready condition, write ours again."""
        ours = self._ready_since.get(uid)
        if ours is None:
            return
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "Ready" and (condition.get("status") == "True") != ours[0]:
                pending = self._last_write.get(uid)
                if pending is None or pending.done():
                    self._publish(uid)

    def _terminate(self, pod: dict[str, Any]) -> None:
        uid = str(_meta(pod).get("uid", ""))
        if uid in self._terminating:
            return
        self._terminating.add(uid)
        self._spawn(self._finish_deletion(pod))

    async def _finish_deletion(self, pod: dict[str, Any]) -> None:
        meta = _meta(pod)
        spec = pod.get("spec") or {}
        grace = meta.get("deletionGracePeriodSeconds")
        if grace is None:
            grace = spec.get("terminationGracePeriodSeconds", 30)
        wait = min(float(grace), self.termination_cap) if spec.get("nodeName") else 0.0
        await asyncio.sleep(wait)
        if spec.get("nodeName") in self._stopped:
            self._terminating.discard(str(meta.get("uid", "")))
            return  # finished when the kubelet is back
        await self.runtime.stop_pod(pod, wait)
        path = resource_path("v1", "pods", str(meta.get("namespace", "default")), str(meta["name"]))
        node = spec.get("nodeName")
        writer = self.client_for(str(node)) if node else self._client
        delay = 0.05
        while True:
            try:
                await writer.delete(path, grace_period_seconds=0, uid=str(meta.get("uid")))
                return
            except ApiError as error:
                if error.status == 404 or (
                    error.status == 409 and not await self._still_there(path, meta)
                ):
                    return  # gone already, or a new pod of the same name
                log.debug("finishing deletion of %s: %s", path, error)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def _still_there(self, path: str, meta: Mapping[str, Any]) -> bool:
        """Whether the pod we are deleting (same uid) still exists: a 409 is not proof that a
        namesake replaced it (an overloaded server or an injected fault answers 409 too)."""
        try:
            current = await self._client.get(path)
        except ApiError as error:
            return error.status != 404
        return str(_meta(current).get("uid")) == str(meta.get("uid"))

    # --- status writes -------------------------------------------------------------------

    def _publish(self, uid: str) -> asyncio.Task[None]:
        task = self._spawn(self._write_status(uid))
        self._last_write[uid] = task
        return task

    async def _write_status(self, uid: str) -> None:
        lock = self._locks.setdefault(uid, asyncio.Lock())
        delay = 0.05
        while True:
            async with lock, self._writes:
                record = self.records.get(uid)
                if record is None or uid in self._terminating or record.node in self._stopped:
                    return  # a stopped kubelet reports nothing; it rewrites all when back
                ready = all(c.ready and c.state == "running" for c in record.containers)
                ready = ready and record.node_ready and not record.failed_reason
                ready = ready and not record.probe_failing
                previous = self._ready_since.get(uid)
                if previous is None or previous[0] != ready:
                    previous = self._ready_since[uid] = (ready, now_rfc3339())
                status = render_status(record, previous[1])
                path = resource_path("v1", "pods", record.namespace, record.name, "status")
                try:
                    await self.client_for(record.node).patch(path, {"status": status})
                    return
                except ApiError as error:
                    if error.status == 404:
                        return
                    # Injected faults or overload: a kubelet keeps reporting until it lands.
                    log.debug("status of %s/%s: %s", record.namespace, record.name, error)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    # --- PodEvents (called by the runtime) -----------------------------------------------

    def container_running(self, uid: str, container: str, *, ready: bool = True) -> None:
        record = self.records.get(uid)
        if record is None or record.failed_reason:
            return
        for c in record.container(container):
            c.state, c.reason, c.ready = "running", "", ready
            c.started_at = now_rfc3339()
            self.logs.write(
                uid,
                c.name,
                f"container {c.name} ({c.image}) started on {record.node}, pod IP {record.pod_ip}"
                + (f", restart {c.restart_count}" if c.restart_count else ""),
            )
        self._publish(uid)

    def container_waiting(self, uid: str, container: str, reason: str, message: str) -> None:
        """The runtime cannot create the container (the kubelet's CreateContainerConfigError:
        an unresolvable env, runAsNonRoot with a root user): waiting, with the reason."""
        record = self.records.get(uid)
        if record is None or record.failed_reason:
            return
        for c in record.container(container):
            c.state, c.reason, c.message, c.ready = "waiting", reason, message, False
            self.logs.write(uid, c.name, f"container {c.name}: {reason}: {message}")
        self._publish(uid)

    def sandbox_refused(self, uid: str, reason: str, message: str) -> None:
        """The runtime will not start this pod (e.g. its ports clash on a shared network):
        a Warning Event and a False PodReadyToStartContainers condition, no restarts."""
        record = self.records.get(uid)
        if record is None:
            return
        record.sandbox_refused = (reason, message)
        self._publish(uid)
        self._spawn(self._warn(record, reason, message))

    async def _warn(self, record: PodRecord, reason: str, message: str) -> None:
        now = now_rfc3339()
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{record.name}.", "namespace": record.namespace},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": record.name,
                "namespace": record.namespace,
                "uid": record.uid,
            },
            "reason": reason,
            "message": message,
            "type": "Warning",
            "source": {"component": "kubelet", "host": record.node},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        with contextlib.suppress(ApiError):
            await self.client_for(record.node).create(
                resource_path("v1", "events", record.namespace), event
            )

    def container_ready(self, uid: str, container: str, ready: bool) -> None:
        record = self.records.get(uid)
        if record is None:
            return
        for c in record.container(container):
            c.ready = ready
        self._publish(uid)

    def container_exited(self, uid: str, container: str, exit_code: int, reason: str = "") -> None:
        record = self.records.get(uid)
        if record is None or record.failed_reason:
            return
        restart = record.restart_policy == "Always" or (
            record.restart_policy == "OnFailure" and exit_code != 0
        )
        for c in record.container(container):
            if c.state == "terminated":
                continue
            c.state, c.ready, c.exit_code = "terminated", False, exit_code
            c.reason = reason or ("Error" if exit_code else "Completed")
            c.finished_at = now_rfc3339()
            self.logs.write(uid, c.name, f"container {c.name} exited with code {exit_code}")
            if restart:
                c.last_terminated = c.terminated()
                self.logs.restarted(uid, c.name)
                c.restart_count += 1
                c.state, c.reason = "waiting", "CrashLoopBackOff"
                c.started_at = ""
                pod = self._pods_by_uid.get(uid)
                if pod is not None:
                    self.runtime.restart_container(pod, c.name, self)
        self._publish(uid)

    # --- logs ----------------------------------------------------------------------------

    def log_source(self, request: LogRequest) -> AsyncIterator[bytes]:
        """pods/log for the API server: the runtime's own logs when it has them (a `logs`
        method taking the LogRequest), else the simulated lifecycle lines. `--previous` of a
        container that has not restarted raises `LogUnavailable` in the kubelet's words."""
        if request.previous:
            self._check_previous(request)
        runtime_logs = getattr(self.runtime, "logs", None)
        if runtime_logs is not None:
            stream: AsyncIterator[bytes] = runtime_logs(request)
            return stream
        return self._lifecycle_lines(request)

    def _check_previous(self, request: LogRequest) -> None:
        try:
            record = self._record(request.namespace, request.pod)
        except LookupError:
            return
        name = request.container or (record.containers[0].name if record.containers else "")
        if not any(c.last_terminated for c in record.container(name)):
            raise LogUnavailable(
                f'previous terminated container "{name}" in pod "{request.pod}" not found'
            )

    async def _lifecycle_lines(self, request: LogRequest) -> AsyncIterator[bytes]:
        try:
            record = self._record(request.namespace, request.pod)
        except LookupError:
            return
        names = [c.name for c in record.containers]
        container = request.container or (names[0] if names else "")
        async for chunk in self.logs.stream(
            record.uid,
            container,
            follow=request.follow,
            tail_lines=request.tail_lines,
            alive=lambda: record.uid in self.records,
            timestamps=request.timestamps,
            since_seconds=request.since_seconds,
            previous=request.previous,
        ):
            yield chunk

    # --- faults --------------------------------------------------------------------------

    def _record(self, namespace: str, name: str) -> PodRecord:
        for record in self.records.values():
            if record.namespace == namespace and record.name == name:
                return record
        raise LookupError(f"pod {namespace}/{name} is not running on a simulated node")

    async def fail_pod(
        self, namespace: str, name: str, exit_code: int = 1, container: str | None = None
    ) -> None:
        """Make the pod's containers (or one of them) exit with `exit_code`; returns when the
        resulting status is written. Restart policy decides Failed or restarted."""
        record = self._record(namespace, name)
        pod = self._pods_by_uid[record.uid]
        for c in record.container(container):
            self.runtime.kill_container(pod, c.name, exit_code, self)
        task = self._last_write.get(record.uid)
        if task is not None:
            await task

    async def set_ready(
        self, namespace: str, name: str, ready: bool, container: str | None = None
    ) -> None:
        """The container keeps running but its readiness probe fails (or passes again): the
        pod stays unready until told otherwise, however fast a restart would have been.
        Returns when the status is written."""
        record = self._record(namespace, name)
        for c in record.container(container):
            c.ready = ready
        await self._publish(record.uid)

    async def fail_node(self, name: str) -> None:
        """The node's kubelet reports NotReady (its runtime is down): the node NotReady, its
        pods unready at once, then Failed with reason NodeLost after `eviction_delay`. The
        node lifecycle controller adds the not-ready taints."""
        self._lost_nodes.add(name)
        await self.heartbeats.beat(name)
        uids = [uid for uid, r in self.records.items() if r.node == name]
        for uid in uids:
            self.records[uid].node_ready = False
        await asyncio.gather(*(self._publish(uid) for uid in uids))
        self._spawn(self._evict_later(uids, name))

    async def restore_node(self, name: str) -> None:
        """The node is back: Ready, untainted, schedulable again (failed pods stay failed)."""
        self._lost_nodes.discard(name)
        await self.heartbeats.beat(name)

    async def _evict_later(self, uids: list[str], node: str) -> None:
        await asyncio.sleep(self.eviction_delay)
        writes = []
        for uid in uids:
            record = self.records.get(uid)
            if record is None or record.failed_reason:
                continue
            record.failed_reason = "NodeLost"
            record.failed_message = (
                f"Node {node} which was running pod {record.name} is unresponsive"
            )
            now = now_rfc3339()
            for c in record.containers:
                if c.state != "terminated":
                    c.state, c.ready, c.exit_code, c.reason = "terminated", False, 137, "NodeLost"
                    c.finished_at = now
            await self.runtime.stop_pod(self._pods_by_uid.get(uid, {}), 0)
            writes.append(self._publish(uid))
        await asyncio.gather(*writes)
