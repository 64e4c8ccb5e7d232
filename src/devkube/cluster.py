"""A whole dev cluster in one object: API server, simulated nodes, scheduler, kubelet, GC, the
node lifecycle controllers (node health and taints, taint-based eviction, pod GC) and the
Deployment and ReplicaSet controllers.

    async with DevCluster() as cluster:
        cluster.write_kubeconfig("kubeconfig")
        await cluster.apply(manifest)

The controllers reach the server only over HTTPS, like real ones; `DevCluster` itself only
wires them together and forwards fault injection.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import yaml

from devkube.addons.maintenance import HostMaintenance
from devkube.controllers.deployments import DeploymentController
from devkube.controllers.disruption import DisruptionController
from devkube.controllers.gc import GarbageCollector
from devkube.controllers.jobfailures import DEFAULT_BACKOFF
from devkube.controllers.jobs import JobController
from devkube.controllers.nodelifecycle import NodeLifecycleController
from devkube.controllers.podgc import PodGarbageCollector
from devkube.controllers.replicasets import ReplicaSetController
from devkube.controllers.resourceclaims import ResourceClaimController
from devkube.controllers.resourcequota import ResourceQuotaController
from devkube.controllers.rootca import RootCAPublisher
from devkube.controllers.tainteviction import TaintEvictionController
from devkube.controlplane.kube import KubeControlPlane
from devkube.kubelet.agent import Kubelet
from devkube.kubelet.api import KubeletApi
from devkube.kubelet.runtime import Runtime, RuntimeContext, simulated_runtime
from devkube.kubelet.streams import stream_backend
from devkube.machinery.client import ApiClient, ApiError, resource_path
from devkube.machinery.discovery import Discovery
from devkube.machinery.informer import Informer
from devkube.nodes import build_nodes, parse_spec
from devkube.scheduler.binder import Scheduler
from devkube.server import ApiServer, Faults

log = logging.getLogger(__name__)

#: Lease renewals per second that the kubelets of a large
#: dev cluster spend between them at most: a 10-node cluster is unaffected (2 s renewals at the
#: default grace), 8,000 nodes renew every 160 s under a 640 s grace.
HEARTBEAT_WRITES_PER_SECOND = 50.0
#: The same for node status posts, which also wake the scheduler (kube posts every 5 min).
STATUS_WRITES_PER_SECOND = 10.0


def _process_runtime(context: RuntimeContext) -> Runtime:
    # [process runtime integration] imported on demand: it needs Linux namespaces and root.
    from devkube.process.runtime import process_runtime

    return process_runtime(context)


#: Who serves the API (`--control-plane NAME`): our embedded server and its controllers, or
#: Kubernetes' own binaries built from the Go module proxy (docs/design.md §8.2), with our
#: kubelets joined to them as nodes.
CONTROL_PLANES = ("embedded", "kubernetes")


class EmbeddedOnly(RuntimeError):
    """What was asked exists only on the embedded control plane (fault injection, the store)."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what}: only the embedded control plane has this")


# Runtime factories by name (`--runtime NAME`); a process runtime is added here.
RUNTIMES: dict[str, Callable[[RuntimeContext], Runtime]] = {
    "simulated": simulated_runtime,
    "process": _process_runtime,
}


def _binds_pod_ips(runtime: str | Runtime) -> bool:
    """A process runtime, by name or as an instance (whose module is then loaded already)."""
    if isinstance(runtime, str):
        return runtime == "process"
    module = sys.modules.get("devkube.process.runtime")
    return module is not None and isinstance(runtime, module.ProcessRuntime)


class Addon(Protocol):
    """Something that is not Kubernetes but runs beside it (a vendor's driver, `addons/`):
    started once the cluster is up, with the cluster itself (it reaches the API through
    `cluster.client`, and may register a kubelet plugin in `cluster.kubelet.plugins`), and
    stopped before it. The core never imports one: whoever starts the cluster passes them
    (`devkube.addons_for`)."""

    async def start(self, cluster: DevCluster) -> None: ...

    async def stop(self) -> None: ...


class DevCluster:
    """Async context manager; `start()`/`stop()` for callers that manage the lifetime."""

    def __init__(
        self,
        port: int = 0,
        nodes: Sequence[str] | None = None,
        runtime: str | Runtime = "simulated",
        kubelet_delay: float = 0.2,
        token: str | None = None,
        *,
        host: str = "127.0.0.1",
        termination_cap: float = 0.5,
        eviction_delay: float = 0.5,
        faults: Faults | None = None,
        node_grace: float = 10.0,
        node_status_every: float = 60.0,
        pod_gc_every: float = 2.0,
        addons: Sequence[Addon] = (),
        job_backoff: tuple[float, float] = DEFAULT_BACKOFF,
        control_plane: str = "embedded",
    ) -> None:
        """`node_grace`: seconds without a heartbeat before a node goes Ready=Unknown (kube's
        --node-monitor-grace-period, 40 s there); kubelets renew their Lease every quarter of
        it and post node status at least every `node_status_every` seconds.

        Both stretch with the node count so that all heartbeats together stay within
        `HEARTBEAT_WRITES_PER_SECOND`: one Python API server cannot take the 3,200 lease
        renewals a second of 8,000 nodes at a 10 s grace (a real control plane spreads them
        over several API servers), and a heartbeat that falls behind marks healthy nodes
        NotReady and their pods with them.

        `job_backoff`: the Job controller's (first, longest) delay in seconds before a failed
        pod is replaced, kube's DefaultJobPodFailureBackOff and MaxJobPodFailureBackOff
        (10 s, 10 min)."""
        self._job_backoff = job_backoff
        if isinstance(runtime, str) and runtime not in RUNTIMES:
            raise ValueError(f"unknown runtime {runtime!r} (known: {', '.join(RUNTIMES)})")
        if control_plane not in CONTROL_PLANES:
            raise ValueError(f"unknown control plane {control_plane!r}: {CONTROL_PLANES}")
        self.control_plane = control_plane
        self._kubelet_delay = kubelet_delay
        self.node_manifests = build_nodes(parse_spec(nodes))
        if _binds_pod_ips(runtime):
            # [process runtime integration] pods bind their IPs: nodes get loopback pod ranges.
            from devkube.process.runtime import loopback_nodes

            self.node_manifests = loopback_nodes(self.node_manifests)
        self._server, self._kube = self._control_plane(host, port, token, faults, node_grace)
        self._runtime_choice = runtime
        self._termination_cap = termination_cap
        self._eviction_delay = eviction_delay
        count = len(self.node_manifests)
        self._node_grace = max(node_grace, 4 * count / HEARTBEAT_WRITES_PER_SECOND)
        self._node_status_every = max(node_status_every, count / STATUS_WRITES_PER_SECOND)
        # Stretched, the node lifecycle controller also looks less often (kube: every 5 s
        # against a 40 s grace), and not once per lease renewal.
        stretched = self._node_grace > node_grace
        self._node_monitor = max(0.5, self._node_grace / 20) if stretched else 0.0
        self._pod_gc_every = pod_gc_every
        self.addons = list(addons)
        self._addons_started: list[Addon] = []
        self._client: ApiClient | None = None
        self._scheduler: Scheduler | None = None
        self._kubelet: Kubelet | None = None
        self._gc: GarbageCollector | None = None
        self._node_lifecycle: NodeLifecycleController | None = None
        self._taint_eviction: TaintEvictionController | None = None
        self._pod_gc: PodGarbageCollector | None = None
        self._root_ca: RootCAPublisher | None = None
        self._quotas: ResourceQuotaController | None = None
        self._discovery: Discovery | None = None
        self._replicasets: ReplicaSetController | None = None
        self._deployments: DeploymentController | None = None
        self._resourceclaims: ResourceClaimController | None = None
        self._disruption: DisruptionController | None = None
        self._maintenance: HostMaintenance | None = None
        self._jobs: JobController | None = None
        self._shared: list[Informer] = []
        self._node_clients: dict[str, ApiClient] = {}
        self._network: Any = None
        self._kubelet_api: KubeletApi | None = None
        self.shared_network_reason = ""  # why process-runtime pods share the host's network

    def _control_plane(
        self, host: str, port: int, token: str | None, faults: Faults | None, grace: float
    ) -> tuple[ApiServer | None, KubeControlPlane | None]:
        """The embedded server, or Kubernetes' own control plane (docs/design.md §8.2)."""
        if self.control_plane == "embedded":
            return ApiServer(host=host, port=port, token=token, faults=faults), None
        if faults is not None or token is not None:
            raise ValueError(
                "faults and a fixed token are the embedded server's; Kubernetes' control "
                "plane has neither"
            )
        names = [str(n["metadata"]["name"]) for n in self.node_manifests]
        return None, KubeControlPlane(node_names=names, node_grace=grace, host=host, port=port)

    # --- lifetime ------------------------------------------------------------------------

    def _plan_network(self) -> None:
        """The process runtime's pod network (docs/design.md, "Process runtime network"):
        a namespace per pod on a bridge of our own, or the loopback fallback and why."""
        if self._runtime_choice != "process":
            return
        import subprocess

        from devkube.process.network import ClusterNetwork

        try:
            network, why = ClusterNetwork.claim()
        except subprocess.CalledProcessError as error:
            network, why = None, f"creating the pod bridge failed: {error.stderr.strip()}"
        if network is None:
            self.shared_network_reason = why
            log.warning(
                "process runtime: pods share the host's network with loopback addresses (%s); "
                "pods that use the same ports clash",
                why,
            )
            return
        self._network = network
        self.node_manifests = network.nodes(self.node_manifests)
        if self._server is not None:
            self._server.extra_sans = (*self._server.extra_sans, network.gateway)
            self._server.also_listen = (network.gateway,)
        elif self._kube is not None:
            self._kube.extra_sans = (*self._kube.extra_sans, network.gateway)
            self._kube.also_listen = network.gateway

    async def start(self) -> None:
        self._plan_network()
        await self.api.start()
        if self._kube is not None:
            await self._serve_kubelet_api(self._kube)
        self._client = ApiClient(self.url, self.token, self.ca_pem)
        self._discovery = Discovery(self._client)
        await self._discovery.refresh()
        await self._ensure_namespace("default")
        await asyncio.gather(*(self._create_node(n) for n in self.node_manifests))
        if self._kube is not None:
            await self._start_node_side()
            return
        # One pods and one nodes watch shared by the controllers, as in one controller manager.
        pods = Informer(self._client, "/api/v1/pods")
        nodes = Informer(self._client, "/api/v1/nodes")
        sets = Informer(self._client, "/apis/apps/v1/replicasets")
        # DRA (resource.k8s.io/v1): claims and templates for the resourceclaim controller,
        # claims, slices and classes for the scheduler.
        claims = Informer(self._client, "/apis/resource.k8s.io/v1/resourceclaims")
        templates = Informer(self._client, "/apis/resource.k8s.io/v1/resourceclaimtemplates")
        slices = Informer(self._client, "/apis/resource.k8s.io/v1/resourceslices")
        classes = Informer(self._client, "/apis/resource.k8s.io/v1/deviceclasses")
        self._shared = [pods, nodes, sets, claims, templates, slices, classes]
        kubelet, controllers = self._make_controllers(
            pods, nodes, sets, (claims, templates, slices, classes)
        )
        await kubelet.start()  # starts the shared informers, nodes first
        for informer in (claims, templates, slices, classes):
            informer.start()
        await asyncio.gather(*(i.synced.wait() for i in (claims, templates, slices, classes)))
        await asyncio.gather(*(controller.start() for controller in controllers))
        for addon in self.addons:
            self._addons_started.append(addon)
            await addon.start(self)
        log.info("dev cluster up at %s with %d nodes", self.url, len(self.node_manifests))

    async def _serve_kubelet_api(self, kube: KubeControlPlane) -> None:
        """The kubelet API kube-apiserver proxies logs, exec and port-forward to (docs/
        design.md §8.2), and each Node pointed at it: its InternalIP an address the server
        listens on (127.0.0.1 for simulated nodes, whose own addresses lead nowhere), its
        port in daemonEndpoints."""
        hosts = ("127.0.0.1", *([self._network.gateway] if self._network is not None else []))
        self._kubelet_api = KubeletApi(kube.kubelet_tls(), hosts)
        await self._kubelet_api.start()
        served = self._kubelet_api.node_status()
        for node in self.node_manifests:
            status = node.setdefault("status", {})
            status["addresses"] = [
                {**a, "address": "127.0.0.1"}
                if a.get("type") == "InternalIP" and a.get("address") not in hosts
                else a
                for a in status.get("addresses") or []
            ]
            status.update(served)

    async def _start_node_side(self) -> None:
        """On Kubernetes' control plane only the node side is ours: the kubelets (one per
        simulated node, over the shared pods and nodes watches), host maintenance and the
        add-ons; kube-controller-manager and kube-scheduler do the rest."""
        assert self._client is not None
        pods = Informer(self._client, "/api/v1/pods")
        nodes = Informer(self._client, "/api/v1/nodes")
        self._shared = [pods, nodes]
        self._kubelet = self._new_kubelet(self._runtime(), pods, nodes)
        self._maintenance = HostMaintenance(self._client, nodes=nodes)
        await self._kubelet.start()
        if self._kubelet_api is not None:
            self._kubelet_api.kubelet = self._kubelet
        await self._maintenance.start()
        for addon in self.addons:
            self._addons_started.append(addon)
            await addon.start(self)
        log.info(
            "dev cluster's %d nodes joined Kubernetes' control plane at %s",
            len(self.node_manifests),
            self.url,
        )

    def _new_kubelet(self, runtime: Runtime, pods: Informer, nodes: Informer) -> Kubelet:
        """The kubelets of every node, on either control plane (each node writes with its own
        client: `_node_client`)."""
        assert self._client is not None
        return Kubelet(
            self._client,
            runtime,
            termination_cap=self._termination_cap,
            eviction_delay=self._eviction_delay,
            pods=pods,
            nodes=nodes,
            lease_duration=self._node_grace,
            status_every=self._node_status_every,
            node_clients=self._node_client,
        )

    def _node_client(self, node: str) -> ApiClient:
        """A node's own client on Kubernetes' control plane (system:node:<name>, in
        system:nodes): what its kubelet writes with, so NodeRestriction holds."""
        if self._kube is None:
            return self.client
        client = self._node_clients.get(node)
        if client is None:
            client = ApiClient(self.url, self._kube.node_token(node), self.ca_pem)
            self._node_clients[node] = client
        return client

    def _runtime(self) -> Runtime:
        runtime = self._runtime_choice
        if isinstance(runtime, str):
            context = RuntimeContext(
                self._kubelet_delay, self.url, self.token, self.ca_pem, self._network
            )
            return RUNTIMES[runtime](context)
        return runtime

    def _make_controllers(
        self,
        pods: Informer,
        nodes: Informer,
        sets: Informer,
        dra: tuple[Informer, Informer, Informer, Informer],
    ) -> tuple[Kubelet, list[Any]]:
        """Every controller on the shared watches (kube-controller-manager's, the scheduler's
        and the kubelet's parts), built before any starts: the kubelet, and the rest in the
        order they start."""
        assert self._client is not None and self._discovery is not None
        claims, templates, slices, classes = dra
        self._scheduler = Scheduler(
            self._client, pods=pods, nodes=nodes, dra=(claims, slices, classes)
        )
        self._resourceclaims = ResourceClaimController(
            self._client, pods=pods, claims=claims, templates=templates
        )
        runtime = self._runtime()
        self._kubelet = self._new_kubelet(runtime, pods, nodes)
        self._node_lifecycle = NodeLifecycleController(
            self._client,
            nodes=nodes,
            pods=pods,
            grace=self._node_grace,
            monitor_every=self._node_monitor or 0.5,
            debounce=self._node_monitor,
        )
        self._taint_eviction = TaintEvictionController(self._client, nodes=nodes, pods=pods)
        self._pod_gc = PodGarbageCollector(
            self._client, nodes=nodes, pods=pods, every=self._pod_gc_every
        )
        self._gc = GarbageCollector(
            self._client, self._discovery, shared={i.path: i for i in self._shared}
        )
        self._replicasets = ReplicaSetController(self._client, pods=pods, replicasets=sets)
        self._deployments = DeploymentController(self._client, pods=pods, replicasets=sets)
        self._disruption = DisruptionController(self._client, pods=pods)
        self._maintenance = HostMaintenance(self._client, nodes=nodes)
        self._quotas = ResourceQuotaController(
            self._client,
            self._discovery,
            pods=pods,
            quotas=Informer(self._client, "/api/v1/resourcequotas"),
        )
        self._jobs = JobController(self._client, pods=pods, backoff=self._job_backoff)
        self._root_ca = RootCAPublisher(self._client, self.ca_pem)
        if self._server is not None:
            self._server.log_source = self._kubelet.log_source
            self._server.stream_backend = stream_backend(runtime)
        controllers: list[Any] = [
            self._resourceclaims,
            self._scheduler,
            self._gc,
            self._node_lifecycle,
            self._taint_eviction,
            self._pod_gc,
            self._replicasets,
            self._deployments,
            self._disruption,
            self._maintenance,
            self._quotas,
            self._jobs,
            self._root_ca,
        ]
        return self._kubelet, controllers

    async def stop(self) -> None:
        while self._addons_started:
            await self._addons_started.pop().stop()
        for part in (
            self._root_ca,
            self._resourceclaims,
            self._maintenance,
            self._disruption,
            self._quotas,
            self._jobs,
            self._deployments,
            self._replicasets,
            self._pod_gc,
            self._taint_eviction,
            self._node_lifecycle,
            self._gc,
            self._scheduler,
            self._kubelet,
        ):
            if part is not None:
                await part.stop()
        if self._kubelet_api is not None:
            await self._kubelet_api.stop()
            self._kubelet_api = None
        for informer in self._shared:
            await informer.stop()
        for client in self._node_clients.values():
            await client.close()
        self._node_clients.clear()
        if self._client is not None:
            await self._client.close()
        await self.api.stop()
        if self._network is not None:
            await asyncio.to_thread(self._network.teardown)
            self._network = None

    async def __aenter__(self) -> DevCluster:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- connection details --------------------------------------------------------------

    @property
    def api(self) -> ApiServer | KubeControlPlane:
        """Whichever control plane serves the API: the embedded server or Kubernetes'."""
        served = self._server or self._kube
        assert served is not None
        return served

    @property
    def server(self) -> ApiServer:
        """The embedded API server (its faults, its store): only on the embedded control
        plane; a test that needs it says so by skipping on Kubernetes'."""
        if self._server is None:
            raise EmbeddedOnly("the embedded API server's internals")
        return self._server

    @property
    def kube(self) -> KubeControlPlane:
        """Kubernetes' control plane (its binaries' logs): only with control_plane="kubernetes"."""
        if self._kube is None:
            raise RuntimeError("this dev cluster runs the embedded control plane")
        return self._kube

    @property
    def url(self) -> str:
        return self.api.url

    @property
    def token(self) -> str:
        return self.api.token

    @property
    def ca_pem(self) -> bytes:
        return self.api.ca_pem

    @property
    def faults(self) -> Faults:
        return self.server.faults

    @property
    def client(self) -> ApiClient:
        """The cluster's own API client (what the fake controllers use)."""
        if self._client is None:
            raise RuntimeError("the dev cluster is not started")
        return self._client

    @property
    def kubelet(self) -> Kubelet:
        if self._kubelet is None:
            raise RuntimeError("the dev cluster is not started")
        return self._kubelet

    @property
    def garbage_collector(self) -> GarbageCollector:
        if self._gc is None:
            raise RuntimeError("the dev cluster is not started")
        return self._gc

    @property
    def node_names(self) -> list[str]:
        return [str(n["metadata"]["name"]) for n in self.node_manifests]

    def kubeconfig_dict(
        self, *, token: str | None = None, namespace: str = "default"
    ) -> dict[str, Any]:
        """The admin's kubeconfig (user kubernetes-admin, group system:masters), or, with
        `token`, one that authenticates with that token (a ServiceAccount's)."""
        return self.api.kubeconfig_dict(token=token, namespace=namespace)

    async def service_account_token(
        self,
        namespace: str,
        name: str,
        *,
        expiration_seconds: int = 3600,
        audiences: Sequence[str] = (),
    ) -> str:
        """A token of ServiceAccount NS/NAME from the TokenRequest API (what `kubectl create
        token` asks for), requested over HTTPS by the cluster's admin client."""
        spec: dict[str, Any] = {"expirationSeconds": expiration_seconds}
        if audiences:
            spec["audiences"] = list(audiences)
        answer = await self.client.create(
            resource_path("v1", "serviceaccounts", namespace, name, "token"),
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec},
        )
        return str(answer["status"]["token"])

    async def service_account_kubeconfig(
        self, namespace: str, name: str, *, expiration_seconds: int = 365 * 24 * 3600
    ) -> dict[str, Any]:
        """A kubeconfig that acts as ServiceAccount NS/NAME (default namespace NS)."""
        token = await self.service_account_token(
            namespace, name, expiration_seconds=expiration_seconds
        )
        return self.kubeconfig_dict(token=token, namespace=namespace)

    def write_kubeconfig(
        self, path: str | os.PathLike[str], config: Mapping[str, Any] | None = None
    ) -> Path:
        """Write the kubeconfig (the admin's unless `config` is given) atomically (temp file
        + rename), so a script waiting for the file never reads half of it."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        text = yaml.safe_dump(dict(config or self.kubeconfig_dict()), sort_keys=False)
        fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(text)
            os.chmod(temp, 0o600)
            os.replace(temp, target)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
        return target

    # --- faults --------------------------------------------------------------------------

    async def fail_pod(
        self, namespace: str, name: str, exit_code: int = 1, container: str | None = None
    ) -> None:
        await self.kubelet.fail_pod(namespace, name, exit_code, container)

    async def set_ready(
        self, namespace: str, name: str, ready: bool, container: str | None = None
    ) -> None:
        await self.kubelet.set_ready(namespace, name, ready, container)

    async def fail_node(self, name: str) -> None:
        await self.kubelet.fail_node(name)

    async def restore_node(self, name: str) -> None:
        await self.kubelet.restore_node(name)

    # --- objects -------------------------------------------------------------------------

    async def apply(self, obj: Mapping[str, Any], namespace: str = "default") -> dict[str, Any]:
        """Create the object, or replace it when it exists (kubectl apply without the merge)."""
        assert self._discovery is not None
        api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
        info = None
        for _ in range(20):  # a CRD applied just before may take a moment to be served
            try:
                info = await self._discovery.resolve(api_version, kind)
                break
            except LookupError:
                await asyncio.sleep(0.05)
        if info is None:
            raise LookupError(f"the server does not serve {kind} in {api_version}")
        body = dict(obj)
        meta = dict(body.get("metadata") or {})
        if info.namespaced:
            meta.setdefault("namespace", namespace)
            await self._ensure_namespace(str(meta["namespace"]))
        body["metadata"] = meta
        ns = meta.get("namespace") if info.namespaced else None
        try:
            made = await self.client.create(info.path(ns), body)
        except ApiError as error:
            if error.status != 409 or not meta.get("name"):
                raise
            current = await self.client.get(info.path(ns, meta["name"]))
            meta["resourceVersion"] = current["metadata"]["resourceVersion"]
            if "status" in current and "status" not in body:
                body["status"] = current["status"]
            made = await self.client.replace(info.path(ns, meta["name"]), body)
        if kind == "CustomResourceDefinition":
            await self._established(info.path(None, str(meta["name"])))
        return made

    async def _established(self, path: str, within: float = 120.0) -> None:
        """kube-apiserver serves a new CRD's resource only once it is Established, about 5 s
        after its names are accepted (its establishing controller waits for other API servers
        to see it): a CRD this cluster applies is handed over Established, as `kubectl wait
        --for condition=established` hands it to a user's next `kubectl apply`. ``within`` is
        a hang guard, not a promise: on 2 cores at load 20 it took over 30 s."""
        deadline = asyncio.get_running_loop().time() + within
        while True:
            crd = await self.client.get(path)
            conditions = (crd.get("status") or {}).get("conditions") or []
            if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                return
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"{crd['metadata']['name']} not Established in {within} s")
            await asyncio.sleep(0.1)

    async def install(self, objects: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Apply objects in order (CRDs before their resources, as given)."""
        return [await self.apply(obj) for obj in objects]

    async def _ensure_namespace(self, name: str) -> None:
        try:
            await self.client.create(
                resource_path("v1", "namespaces"),
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
            )
        except ApiError as error:
            if error.status != 409:
                raise
        if self._kube is not None:
            await self._service_account_made(name)

    async def _service_account_made(self, namespace: str, within: float = 30.0) -> None:
        """Kubernetes' ServiceAccount admission refuses pods until kube-controller-manager has
        made the namespace's `default` account, moments after the namespace: a namespace
        this cluster makes is handed over with it (as a user's, made minutes before, is)."""
        path = resource_path("v1", "serviceaccounts", namespace, "default")
        deadline = asyncio.get_running_loop().time() + within
        while True:
            try:
                await self.client.get(path)
                return
            except ApiError as error:
                if error.status != 404 or asyncio.get_running_loop().time() > deadline:
                    raise
            await asyncio.sleep(0.1)

    async def _create_node(self, node: Mapping[str, Any]) -> None:
        """Registered as a kubelet registers its node: by the node itself on Kubernetes'
        control plane (NodeRestriction lets a node create only its own Node)."""
        name = str(node["metadata"]["name"])
        client = self._node_client(name)
        created = await client.create(resource_path("v1", "nodes"), node)
        if created.get("status") != node["status"]:
            # The server keeps status apart from spec; set it through the subresource.
            await client.patch(
                resource_path("v1", "nodes", name=name, subresource="status"),
                {"status": node["status"]},
            )
