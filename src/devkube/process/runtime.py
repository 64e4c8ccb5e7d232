"""The kubelet's "process" runtime: every pod's containers as real local processes.

It implements the kubelet's `Runtime` protocol (devcluster.runtime). The kubelet keeps owning
pod IPs (nodes get loopback pod ranges, see `loopback_nodes`), status, restart decisions and
graceful deletion; this runtime makes the processes, the per-pod namespaces and files, runs the
probes and keeps each pod's /etc/hosts in step with the cluster's pods and services.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import tempfile
from collections.abc import AsyncIterator, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from devkube.kubelet.dra import ContainerEdits
from devkube.kubelet.podtokens import pod_token, wants_token
from devkube.process.container import START_ERROR, Backoff, ContainerEvents, ContainerRunner
from devkube.process.hosts import hosts_file, pod_record
from devkube.process.network import ClusterNetwork
from devkube.process.pod import PodSettings, ProcessPod
from devkube.process.sandbox import process_runtime_available

if TYPE_CHECKING:
    from devkube.kubelet.runtime import RuntimeContext
    from devkube.machinery.client import ApiClient, WatchEvent
    from devkube.machinery.informer import Informer
    from devkube.server import Connection, ExecIO, ExecRequest
    from devkube.server.endpoints.logs import LogRequest

log = logging.getLogger(__name__)

Key = tuple[str, str]
_FOLLOW_POLL = 0.2


def _uid(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("uid") or "")


def _key(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")


def service_env(api_url: str) -> dict[str, str]:
    """The variables in-cluster clients use to find the API server."""
    parts = urlsplit(api_url)
    host, port = parts.hostname or "127.0.0.1", str(parts.port or 443)
    return {
        "KUBERNETES_SERVICE_HOST": host,
        "KUBERNETES_SERVICE_PORT": port,
        "KUBERNETES_SERVICE_PORT_HTTPS": port,
        "KUBERNETES_PORT": f"tcp://{host}:{port}",
        f"KUBERNETES_PORT_{port}_TCP": f"tcp://{host}:{port}",
        f"KUBERNETES_PORT_{port}_TCP_PROTO": "tcp",
        f"KUBERNETES_PORT_{port}_TCP_PORT": port,
        f"KUBERNETES_PORT_{port}_TCP_ADDR": host,
    }


def loopback_nodes(nodes: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Give nodes loopback pod ranges (127.1.0.0/24, 127.1.1.0/24, ...) and 127.0.0.1 as their
    address, so the kubelet hands out pod IPs that processes on this machine can bind."""
    out = []
    for index, node in enumerate(nodes):
        cidr = f"127.{1 + index // 256}.{index % 256}.0/24"
        copy = {**node, "spec": {**(node.get("spec") or {}), "podCIDR": cidr}}
        status = dict(node.get("status") or {})
        status["addresses"] = [
            {**a, "address": "127.0.0.1"} if a.get("type") == "InternalIP" else a
            for a in status.get("addresses") or []
        ]
        copy["status"] = status
        out.append(copy)
    return out


def process_runtime(context: RuntimeContext) -> ProcessRuntime:
    """The factory DevCluster calls once its API server is up (`runtime="process"`); with the
    cluster's network (a namespace per pod) when it could make one."""
    network = context.network if isinstance(context.network, ClusterNetwork) else None
    runtime = ProcessRuntime(network=network)
    runtime.connect(context.api_url, context.token, context.ca_pem)
    return runtime


def declared_ports(pod: Mapping[str, Any]) -> set[tuple[int, str]]:
    """(containerPort, protocol) of every container of the pod."""
    spec = pod.get("spec") or {}
    return {
        (int(port["containerPort"]), str(port.get("protocol") or "TCP"))
        for container in spec.get("containers") or []
        for port in container.get("ports") or []
        if isinstance(port, Mapping) and port.get("containerPort")
    }


def _runner(process_pod: ProcessPod, container: str) -> ContainerRunner | None:
    found = process_pod.runners.get(container)
    return found or next((r for r in process_pod.init_runners if r.name == container), None)


def _on_host(api_url: str, host: str) -> str:
    parts = urlsplit(api_url)
    return parts._replace(netloc=f"{host}:{parts.port or 443}").geturl()


class ProcessRuntime:
    """Runs pods as processes in private namespaces (needs Linux, root and util-linux)."""

    def __init__(
        self,
        *,
        state_dir: str | Path | None = None,
        backoff: Backoff | None = None,
        host_ip: str = "127.0.0.1",
        domain: str = "cluster.local",
        network: ClusterNetwork | None = None,
    ) -> None:
        ok, why = process_runtime_available()
        if not ok:
            raise RuntimeError(why)
        # Each pod in its own network namespace on the cluster's bridge, or (None) every pod
        # on the host's network with a loopback address.
        self.network = network
        if network is not None:
            host_ip = network.gateway
        self._own_dir = state_dir is None
        self.state_dir = Path(state_dir or tempfile.mkdtemp(prefix="devcluster-pods-"))
        self.domain = domain
        self.settings = PodSettings(host_ip=host_ip, backoff=backoff or Backoff())
        self.pods: dict[str, ProcessPod] = {}
        self._starting: dict[str, asyncio.Task[None]] = {}
        self._client: ApiClient | None = None
        self._informers: list[Informer] = []
        self._world_pods: dict[Key, Mapping[str, Any]] = {}
        self._world_services: dict[Key, Mapping[str, Any]] = {}
        self._dirty = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._netns: dict[str, str] = {}
        self._refused: set[str] = set()
        # Prepared DRA devices per pod uid, by container (kubelet/dra.py), until it starts.
        self._devices: dict[str, Mapping[str, ContainerEdits]] = {}

    # --- wiring --------------------------------------------------------------------------

    def connect(self, api_url: str, token: str, ca_pem: bytes) -> None:
        """Use this API server: pods get its address, token and CA, and the runtime watches
        its pods and services to keep every pod's /etc/hosts current (from the first pod on,
        when an event loop runs)."""
        from devkube.machinery.client import ApiClient

        self._client = ApiClient(api_url, token, ca_pem)
        # Inside a pod's network namespace the host is the bridge's gateway address.
        pod_url = _on_host(api_url, self.network.gateway) if self.network else api_url
        self.settings = PodSettings(
            host_ip=self.settings.host_ip,
            service_env=service_env(pod_url),
            token=token,
            ca_pem=ca_pem,
            backoff=self.settings.backoff,
        )

    def _watch_cluster(self) -> None:
        if self._client is None or self._informers:
            return
        from devkube.machinery.informer import Informer

        pods = Informer(self._client, "/api/v1/pods", self._on_world_event)
        services = Informer(self._client, "/api/v1/services", self._on_world_event)
        self._informers = [pods, services]
        for informer in self._informers:
            informer.start()

    def _on_world_event(self, event: WatchEvent) -> None:
        del event
        if len(self._informers) == 2:
            pods, services = self._informers
            self.observe(pods.cache.values(), services.cache.values())

    def observe(
        self, pods: Iterable[Mapping[str, Any]], services: Iterable[Mapping[str, Any]]
    ) -> None:
        """Take a new view of the cluster's pods and services; hosts files follow shortly."""
        self._world_pods = {_key(p): p for p in pods}
        self._world_services = {_key(s): s for s in services}
        self._mark_dirty()

    def _mark_dirty(self) -> None:
        self._dirty.set()
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_hosts_loop())

    async def _write_hosts_loop(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            try:
                self.refresh_hosts()
            except Exception:
                log.exception("rewriting pod hosts files failed")
            await asyncio.sleep(0.02)

    def refresh_hosts(self) -> None:
        """Rewrite every local pod's /etc/hosts from the current view of the cluster."""
        records = [pod_record(p) for p in self._world_pods.values()]
        services = list(self._world_services.values())
        for pod in list(self.pods.values()):
            api_view = self._world_pods.get((pod.namespace, pod.name), pod.pod)
            me = pod_record(api_view, ip=pod.pod_ip)
            with contextlib.suppress(FileNotFoundError):  # a pod being removed
                pod.write_hosts(hosts_file(me, records, services, domain=self.domain))

    # --- the kubelet's Runtime protocol ----------------------------------------------------

    def _spawn(self, coroutine: Any) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def use_devices(self, uid: str, edits: Mapping[str, ContainerEdits]) -> None:
        """The devices the kubelet prepared for the pod's containers, before `start_pod`."""
        self._devices[uid] = edits

    def start_pod(self, pod: Mapping[str, Any], pod_ip: str, events: ContainerEvents) -> None:
        uid = _uid(pod)
        if uid in self.pods or uid in self._starting or uid in self._refused:
            return
        if self.network is None:
            clash = self._port_clash(pod)
            refuse = getattr(events, "sandbox_refused", None)
            if clash and refuse is not None:
                # On the shared network the second pod could only crash-loop on its port.
                self._refused.add(uid)
                refuse(uid, "NetworkNotIsolated", clash)
                return
        self._watch_cluster()
        self._starting[uid] = self._spawn(self._start(pod, pod_ip, events))

    async def _start(self, pod: Mapping[str, Any], pod_ip: str, events: ContainerEvents) -> None:
        uid = _uid(pod)
        try:
            lookup, allocatable = await self._references(pod)
            settings = self.settings
            if allocatable:
                settings = PodSettings(**{**settings.__dict__, "allocatable": allocatable})
            if self._client is not None and wants_token(pod):
                # The pod's own ServiceAccount token, bound to the pod (not the cluster's).
                token = await pod_token(self._client, pod)
                settings = PodSettings(**{**settings.__dict__, "token": token})
            namespace, name = _key(pod)
            root = self.state_dir / f"{namespace}_{name}_{uid[:8]}"
            netns = None
            if self.network is not None:
                netns = await asyncio.to_thread(self.network.add_pod, pod_ip)
                self._netns[uid] = netns
            process_pod = ProcessPod(
                pod,
                root,
                pod_ip,
                settings,
                lookup=lookup,
                netns=netns,
                devices=self._devices.pop(uid, {}),
            )
            process_pod.sandbox.prepare()
            self.pods[uid] = process_pod
            self.refresh_hosts()
            await process_pod.start(events)
        except Exception as error:
            log.exception("starting pod %s failed", _key(pod))
            for container in (pod.get("spec") or {}).get("containers") or []:
                events.container_exited(uid, str(container.get("name")), START_ERROR, "StartError")
            del error
        finally:
            self._starting.pop(uid, None)

    async def _references(self, pod: Mapping[str, Any]) -> tuple[Any, dict[str, str]]:
        """Fetch the ConfigMaps, Secrets and node allocatable the pod's env refers to."""
        if self._client is None:
            return None, {}
        from devkube.machinery.client import ApiError, resource_path

        namespace, _ = _key(pod)
        spec = pod.get("spec") or {}
        wanted: set[tuple[str, str]] = set()
        for c in list(spec.get("containers") or []) + list(spec.get("initContainers") or []):
            for source in c.get("envFrom") or []:
                if "configMapRef" in source:
                    wanted.add(("ConfigMap", str(source["configMapRef"].get("name"))))
                if "secretRef" in source:
                    wanted.add(("Secret", str(source["secretRef"].get("name"))))
            for entry in c.get("env") or []:
                value_from = entry.get("valueFrom") or {}
                if "configMapKeyRef" in value_from:
                    wanted.add(("ConfigMap", str(value_from["configMapKeyRef"].get("name"))))
                if "secretKeyRef" in value_from:
                    wanted.add(("Secret", str(value_from["secretKeyRef"].get("name"))))
        data: dict[tuple[str, str], dict[str, str]] = {}
        for kind, name in wanted:
            plural = "configmaps" if kind == "ConfigMap" else "secrets"
            try:
                obj = await self._client.get(resource_path("v1", plural, namespace, name))
            except ApiError:
                continue
            values = {str(k): str(v) for k, v in (obj.get("data") or {}).items()}
            if kind == "Secret":
                values = {k: base64.b64decode(v).decode() for k, v in values.items()}
                values.update({str(k): str(v) for k, v in (obj.get("stringData") or {}).items()})
            data[(kind, name)] = values

        def lookup(kind: str, name: str, key: str) -> str | None:
            values = data.get((kind, name))
            if values is None:
                return None
            if key == "":
                return "\n".join(f"{k}={v}" for k, v in values.items())
            return values.get(key)

        allocatable: dict[str, str] = {}
        node_name = spec.get("nodeName")
        if node_name:
            with contextlib.suppress(ApiError):
                node = await self._client.get(resource_path("v1", "nodes", name=str(node_name)))
                allocatable = {
                    str(k): str(v)
                    for k, v in ((node.get("status") or {}).get("allocatable") or {}).items()
                }
        return lookup, allocatable

    def restart_container(
        self, pod: Mapping[str, Any], container: str, events: ContainerEvents
    ) -> None:
        process_pod = self.pods.get(_uid(pod))
        if process_pod is not None:
            process_pod.restart(container, events)

    def kill_container(
        self, pod: Mapping[str, Any], container: str, exit_code: int, events: ContainerEvents
    ) -> None:
        process_pod = self.pods.get(_uid(pod))
        if process_pod is not None:
            process_pod.kill(container, exit_code)

    def _port_clash(self, pod: Mapping[str, Any]) -> str:
        """Why the pod cannot run beside the others when all share the host's network: a
        declared container port another local pod declares too ("" when none)."""
        wanted = declared_ports(pod)
        for other in self.pods.values():
            taken = wanted & declared_ports(other.pod)
            if taken:
                port, protocol = sorted(taken)[0]
                return (
                    f"port {port}/{protocol} is already used by pod {other.namespace}/"
                    f"{other.name}: pods share this machine's network here (no network "
                    "namespace per pod), so only one of them can listen on it"
                )
        return ""

    async def stop_pod(self, pod: Mapping[str, Any], grace: float) -> None:
        uid = _uid(pod)
        self._refused.discard(uid)
        self._devices.pop(uid, None)
        starting = self._starting.get(uid)
        if starting is not None:
            with contextlib.suppress(Exception):
                await starting
        process_pod = self.pods.get(uid)
        if process_pod is not None:
            await process_pod.stop(grace)
            if self.pods.pop(uid, None) is not None:
                process_pod.remove_files()
        netns = self._netns.pop(uid, None)
        if netns is not None and self.network is not None:
            await asyncio.to_thread(self.network.remove_pod, netns)

    async def close(self) -> None:
        for informer in self._informers:
            await informer.stop()
        self._informers = []
        if self._client is not None:
            await self._client.close()
        await asyncio.gather(
            *(self.stop_pod(p.pod, 0) for p in list(self.pods.values())), return_exceptions=True
        )
        for task in [self._writer, *self._tasks]:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if self._own_dir:
            import shutil

            shutil.rmtree(self.state_dir, ignore_errors=True)

    # --- what else a kubelet serves ------------------------------------------------------

    def find(self, namespace: str, name: str) -> ProcessPod | None:
        for process_pod in self.pods.values():
            if (process_pod.namespace, process_pod.name) == (namespace, name):
                return process_pod
        return None

    def read_log(self, namespace: str, name: str, container: str | None = None) -> bytes | None:
        """A container's output (the first container's when `container` is None); None when
        the pod is not running here."""
        process_pod = self.find(namespace, name)
        if process_pod is None:
            return None
        if container is None:
            names = list(process_pod.runners)
            if not names:
                return b""
            container = names[0]
        return process_pod.read_log(container)

    async def logs(self, request: LogRequest) -> AsyncIterator[bytes]:
        """pods/log, which the kubelet serves from here: output so far (its last `tail_lines`),
        then, when following, whatever the container writes until the pod goes away."""
        data = self.read_log(request.namespace, request.pod, request.container)
        if data is None:
            return
        if request.tail_lines is not None:
            lines = data.splitlines(keepends=True)
            chunk = b"".join(lines[-request.tail_lines :]) if request.tail_lines > 0 else b""
        else:
            chunk = data
        if chunk:
            yield chunk
        seen = len(data)
        while request.follow:
            await asyncio.sleep(_FOLLOW_POLL)
            data = self.read_log(request.namespace, request.pod, request.container)
            if data is None:
                return
            if len(data) > seen:
                yield data[seen:]
                seen = len(data)

    # --- exec, attach and port-forward (the kubelet's streaming server) ---------------------

    def _running_pod(self, namespace: str, name: str) -> ProcessPod:
        from devkube.server import StreamRefused

        process_pod = self.find(namespace, name)
        if process_pod is None or not process_pod.sandbox.running:
            raise StreamRefused(f'pod "{name}" is not running here yet (its sandbox is not up)')
        return process_pod

    def check_exec(self, request: ExecRequest, pod: Mapping[str, Any]) -> None:
        from devkube.server import StreamRefused

        process_pod = self._running_pod(request.namespace, request.pod)
        runner = _runner(process_pod, request.container)
        if runner is None or not runner.running:
            raise StreamRefused(f'container not found ("{request.container}")')
        if request.attach and request.stdin and not runner.keeps_stdin:
            raise StreamRefused(
                f"container {request.container} reads no stdin: its spec does not set "
                "`stdin: true` (its stdin is /dev/null); attach without -i, or use "
                "kubectl exec -i"
            )

    async def exec(self, request: ExecRequest, io: ExecIO) -> int:
        from devkube.process.attach import run_attach
        from devkube.process.execs import run_exec

        self.check_exec(request, {})
        process_pod = self._running_pod(request.namespace, request.pod)
        runner = _runner(process_pod, request.container)
        assert runner is not None
        if request.attach:
            return await run_attach(
                runner, lambda: process_pod.read_log(request.container), io, stdin=request.stdin
            )
        return await run_exec(
            process_pod.sandbox,
            request.command,
            runner.launch.env,
            runner.launch.workdir,
            io,
            user=runner.launch.user,
            stdin=request.stdin,
            stdout=request.stdout,
            stderr=request.stderr,
            tty=request.tty,
        )

    def check_portforward(self, namespace: str, pod: Mapping[str, Any]) -> None:
        self._running_pod(namespace, str(pod["metadata"]["name"]))

    async def open_port(self, namespace: str, pod: Mapping[str, Any], port: int) -> Connection:
        """A TCP connection to the pod's address (as a kubelet's port-forward does from inside
        the pod's network namespace)."""
        process_pod = self._running_pod(namespace, str(pod["metadata"]["name"]))
        return await asyncio.open_connection(process_pod.pod_ip, port)
