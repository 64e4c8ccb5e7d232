"""Harness: Ray's own KubeRay autoscaler clients, unmodified, against the dev cluster.

Ray's clients are synchronous (`requests`) and read their endpoint from the environment once,
when `ray.autoscaler._private.kuberay.node_provider` is imported. So the dev cluster and the
operator (its `Manager`, as `raycluster-operator run` builds it) run in a background thread
with their own event loop, on a port chosen before Ray's module is imported; the tests
themselves are plain synchronous code that drive Ray's providers exactly as Ray's autoscalers
do, and inspect the cluster over plain HTTPS.

Only configuration crosses into Ray: `KUBERNETES_SERVICE_HOST`,
`KUBERNETES_SERVICE_PORT_HTTPS`, `RAY_KUBERAY_CA_CERT_PATH`, a service-account token file and
the module global `IN_CLUSTER_TOKEN_PATH` pointing at it. No Ray function is replaced.

No `__init__.py` here on purpose: a package named `ray` under tests/ would shadow Ray.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import itertools
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
import requests

from devkube.cluster import DevCluster
from raycluster_operator.api.models import load_cluster
from raycluster_operator.builders.autoscaler import service_account_name
from raycluster_operator.controller.crds import crd_manifest
from raycluster_operator.controller.manager import Manager
from raycluster_operator.devcluster.attach import operator_kubeconfig
from tests.harness import control_planes
from tests.harness import manifests as m
from tests.harness.cluster import LoopThread, free_port, start_dev_cluster, stop_dev_cluster
from tests.harness.manifests import TPU_ACCELERATOR, TPU_TOPOLOGY
from tests.harness.operator import launch_operator, operator_options
from tests.harness.pods import (
    HOST_INDEX,
    REPLICA_INDEX,
    REPLICA_NAME,
    is_running,
    is_terminating,
    labels,
)

T = TypeVar("T")

NODE_PROVIDER = "ray.autoscaler._private.kuberay.node_provider"
CLOUD_PROVIDER = "ray.autoscaler.v2.instance_manager.cloud_providers.kuberay.cloud_provider"
CONFIG_PRODUCER = "ray.autoscaler._private.kuberay.autoscaling_config"

# How long a scenario may wait for the operator/kubelet to reach a state. Generous because the
# machine is shared; the tests assert on the state reached, never on how long it took.
SETTLE_S = 20.0


# ---------------------------------------------------------------- cluster + operator


#: The session's embedded world: enough TPU pools for a few clusters at once (one v6e 4x4 slice
#: fills one pool). A module on both control planes (`control_planes`) starts a smaller one on
#: Kubernetes' for itself: a slice or two at a time, and a pool spare for the namespace of the
#: test before, still terminating.
NODES = ["tpu:v6e:4x4:12", "gpu:gb200:4:3", "cpu:6"]
KUBERNETES_NODES = ["tpu:v6e:4x4:4", "cpu:2"]


async def _start_cluster(port: int, control_plane: str) -> DevCluster:
    # Short kubelet and termination delays keep the scenarios quick.
    return await start_dev_cluster(
        NODES if control_plane == control_planes.EMBEDDED else KUBERNETES_NODES,
        port=port,
        kubelet_delay=0.02,
        termination_cap=0.2,
        crds=[crd_manifest()],
        control_plane=control_plane,
    )


@contextlib.asynccontextmanager
async def running_operator(kubeconfig: dict[str, Any]) -> AsyncIterator[Manager]:
    """The operator in-process, as `raycluster-operator run` starts it, minus the HTTP
    endpoints and leader election (one replica, no ports to collide on)."""
    options = operator_options(
        retry_base_delay=0.02, retry_max_delay=1.0, expectations_timeout=10.0
    )
    op = launch_operator(kubeconfig, options)
    try:
        await op.synced(within=60, interval=0.01)
        yield op.manager
    finally:
        await op.stop()


@dataclass
class World:
    """One dev cluster with the operator attached, shared by the Ray tests of a session."""

    loop: LoopThread
    cluster: DevCluster
    kubeconfig: Path
    ca_path: Path
    token_path: Path
    http: Any  # requests.Session with the CA and the bearer token
    url: str
    _names: Iterator[int] = field(default_factory=lambda: itertools.count())

    # ---- objects, over plain HTTPS (the same `requests` transport Ray uses)

    def call(
        self, method: str, path: str, body: Any = None, content_type: str | None = None
    ) -> Any:
        headers = {"Content-Type": content_type or "application/json"}
        data = None if body is None else json.dumps(body)
        # verify per request: a session-wide setting loses to $REQUESTS_CA_BUNDLE.
        resp = self.http.request(
            method,
            self.url + path,
            data=data,
            headers=headers,
            verify=str(self.ca_path),
        )
        if resp.status_code >= 400:
            raise AssertionError(f"{method} {path} -> {resp.status_code}: {resp.text}")
        return resp.json() if resp.content else None

    def new_namespace(self) -> str:
        name = f"ray-{next(self._names)}-{os.getpid() % 1000}"
        self.call("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
        return name

    def create_cluster(self, ns: str, obj: dict[str, Any]) -> dict[str, Any]:
        return self.call("POST", f"/apis/ray.io/v1/namespaces/{ns}/rayclusters", obj)

    def get_cluster(self, ns: str, name: str) -> dict[str, Any]:
        return self.call("GET", f"/apis/ray.io/v1/namespaces/{ns}/rayclusters/{name}")

    def patch_cluster(self, ns: str, name: str, patch: Any, kind: str = "merge") -> dict[str, Any]:
        ctype = {"merge": "application/merge-patch+json", "json": "application/json-patch+json"}
        return self.call(
            "PATCH", f"/apis/ray.io/v1/namespaces/{ns}/rayclusters/{name}", patch, ctype[kind]
        )

    def pods(self, ns: str, cluster: str) -> list[dict[str, Any]]:
        sel = f"ray.io/cluster%3D{cluster}"
        return self.call("GET", f"/api/v1/namespaces/{ns}/pods?labelSelector={sel}")["items"]

    def wait(self, what: str, check: Callable[[], T | None], timeout: float = SETTLE_S) -> T:
        """Poll `check` until it returns something truthy; fail with `what` otherwise."""
        deadline = time.monotonic() + timeout
        last: T | None = None
        while time.monotonic() < deadline:
            last = check()
            if last:
                return last
            time.sleep(0.01)
        raise AssertionError(f"timed out waiting for {what}; last seen: {last!r}")

    def live_names(self, ns: str, cluster: str, group: str | None = None) -> set[str]:
        """Names of the cluster's pods without deletionTimestamp (of one group if given)."""
        return {
            p["metadata"]["name"]
            for p in self.pods(ns, cluster)
            if not is_terminating(p) and (group is None or labels(p).get("ray.io/group") == group)
        }

    def wait_workers(self, ns: str, cluster: str, group: str, count: int) -> set[str]:
        """Wait until the group has exactly `count` live pods; return their names."""

        def check() -> set[str] | None:
            names = self.live_names(ns, cluster, group)
            return names if len(names) == count else None

        return self.wait(f"{count} live pods of {group}", check)

    def wait_slices(
        self,
        ns: str,
        cluster: str,
        group: str,
        hosts: int,
        count: int,
        *,
        running: bool = False,
        timeout: float = SETTLE_S,
    ) -> dict[int, list[dict[str, Any]]]:
        """Wait until the group has exactly `count` complete slices; return them by index."""

        def check() -> dict[int, list[dict[str, Any]]] | None:
            found = complete_slices(self.pods(ns, cluster), group, hosts, running=running)
            return found if len(found) == count else None

        state = "running " if running else ""
        return self.wait(f"{count} complete {state}slices of {group}", check, timeout)

    # ---- Ray's own clients, built the way Ray builds them

    def as_autoscaler(self, ns: str, name: str) -> None:
        """Ray's clients read the token file once per client: give them the token of the
        ServiceAccount the operator made for this cluster's autoscaler, as its sidecar has
        in the head pod, so they run with exactly the Role the operator grants it. A cluster
        without autoscaling has no such account; Ray's clients then act as the admin."""
        obj = self.get_cluster(ns, name)
        self.token_path.write_text(self.cluster.token)
        if not obj["spec"].get("enableInTreeAutoscaling"):
            return
        account = service_account_name(load_cluster(obj))
        path = f"/api/v1/namespaces/{ns}/serviceaccounts/{account}/token"

        def token() -> str | None:
            resp = self.http.post(
                self.url + path,
                json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest"},
                verify=str(self.ca_path),
            )
            return str(resp.json()["status"]["token"]) if resp.status_code == 201 else None

        self.token_path.write_text(self.wait(f"service account {ns}/{account}", token))

    def autoscaling_config(self, ns: str, name: str) -> dict[str, Any]:
        self.as_autoscaler(ns, name)
        producer_mod = importlib.import_module(CONFIG_PRODUCER)
        return producer_mod.AutoscalingConfigProducer(name, ns)()

    def v2_provider(self, ns: str, name: str, gcs_client: Any = None) -> Any:
        """`KubeRayProvider` as `ray.autoscaler.v2.autoscaler.Autoscaler` constructs it.

        The GCS client only serves in-place pod resize and idle termination; clusters that
        enable neither need none.
        """
        config = self.autoscaling_config(ns, name)
        provider_config = dict(config["provider"])
        provider_config["head_node_type"] = config["head_node_type"]
        mod = importlib.import_module(CLOUD_PROVIDER)
        return mod.KubeRayProvider(config["cluster_name"], provider_config, gcs_client=gcs_client)

    def v1_provider(self, ns: str, name: str) -> Any:
        """`KubeRayNodeProvider` as `_get_node_provider` constructs it for type `kuberay`."""
        config = self.autoscaling_config(ns, name)
        mod = importlib.import_module(NODE_PROVIDER)
        return mod.KubeRayNodeProvider(config["provider"], config["cluster_name"])


def _configure_ray(port: int, ca_path: Path, token_path: Path, mp: pytest.MonkeyPatch) -> None:
    """Point Ray's in-cluster configuration at the dev cluster, from outside only.

    Ray reads its environment once, at import; the variables are set only around that import
    so that the rest of the session does not look as if it ran inside a pod.
    """
    with pytest.MonkeyPatch.context() as env:
        env.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        env.setenv("KUBERNETES_SERVICE_PORT_HTTPS", str(port))
        env.setenv("RAY_KUBERAY_CA_CERT_PATH", str(ca_path))
        env.delenv("RAY_HEAD_POD_NAME", raising=False)
        if NODE_PROVIDER in sys.modules:
            # Imported earlier in this process: re-run its import so it reads them again.
            importlib.reload(sys.modules[NODE_PROVIDER])
        node_provider = importlib.import_module(NODE_PROVIDER)
    endpoint = node_provider.KUBERNETES_HOST
    assert endpoint == f"127.0.0.1:{port}", f"Ray's endpoint is frozen at {endpoint}"
    assert str(ca_path) == node_provider.KUBERAY_CA_CERT_PATH
    mp.setattr(node_provider, "IN_CLUSTER_TOKEN_PATH", str(token_path))
    importlib.import_module(CLOUD_PROVIDER)
    importlib.import_module(CONFIG_PRODUCER)


@contextlib.contextmanager
def _running_world(tmp: Path, control_plane: str) -> Iterator[World]:
    loop = LoopThread()
    port = free_port()
    cluster = loop.run(_start_cluster(port, control_plane), timeout=120)
    operator_cm: Any = None
    try:
        kubeconfig = tmp / "kubeconfig"
        kubeconfig.write_text(json.dumps(cluster.kubeconfig_dict()))
        ca_path = tmp / "ca.crt"
        ca_path.write_bytes(cluster.ca_pem)
        token_path = tmp / "token"
        token_path.write_text(cluster.token)
        http = requests.Session()
        http.headers["Authorization"] = f"Bearer {cluster.token}"
        w = World(loop, cluster, kubeconfig, ca_path, token_path, http, cluster.url)
        # The operator acts as its ServiceAccount with deploy/'s RBAC, as in production.
        operator_cm = running_operator(loop.run(operator_kubeconfig(cluster)))
        loop.run(operator_cm.__aenter__())
        yield w
    finally:
        if operator_cm is not None:
            with contextlib.suppress(Exception):
                loop.run(operator_cm.__aexit__(None, None, None))
        loop.run(stop_dev_cluster(cluster))
        loop.close()


@contextlib.contextmanager
def _ray_pointed_at(w: World) -> Iterator[None]:
    mp = pytest.MonkeyPatch()
    try:
        _configure_ray(int(w.url.rsplit(":", 1)[1]), w.ca_path, w.token_path, mp)
        yield
    finally:
        mp.undo()


@pytest.fixture(scope="session")
def embedded_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """One embedded world for the whole session (every module of this directory)."""
    with _running_world(tmp_path_factory.mktemp("ray-world"), control_planes.EMBEDDED) as w:
        yield w


@pytest.fixture(scope="module")
def world(
    control_plane: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    """The session's embedded world, or (a `control_planes` module's Kubernetes variant) a
    world of the module's own on Kubernetes' control plane; Ray's clients, which read their
    endpoint at import, pointed at it for the module."""
    control_planes.require(control_plane)
    with contextlib.ExitStack() as stack:
        if control_plane == control_planes.EMBEDDED:
            w: World = request.getfixturevalue("embedded_world")
        else:
            tmp = tmp_path_factory.mktemp("ray-kube-world")
            w = stack.enter_context(_running_world(tmp, control_plane))
        stack.enter_context(_ray_pointed_at(w))
        yield w


@pytest.fixture
def ns(world: World) -> Iterator[str]:
    world.token_path.write_text(world.cluster.token)  # no autoscaler token of a past test
    name = world.new_namespace()
    yield name
    # Free the simulated TPU pools for the next scenario.
    with contextlib.suppress(Exception):
        world.call("DELETE", f"/api/v1/namespaces/{name}")


# ---------------------------------------------------------------- manifests


def ray_container(limits: dict[str, str]) -> dict[str, Any]:
    return m.container("ray-worker", limits=limits, requests=limits)


def tpu_group(
    name: str = "tpu",
    *,
    replicas: int = 0,
    min_replicas: int = 0,
    max_replicas: int = 2,
    hosts: int = 4,
    topology: str = "4x4",
    accelerator: str = "tpu-v6e-slice",
    chips: int = 4,
) -> dict[str, Any]:
    """A GKE TPU worker group: one slice = `hosts` pods, `chips` chips per pod."""
    limits = {"cpu": "1", "memory": "1Gi", "google.com/tpu": str(chips)}
    pod = m.template(
        ray_container(limits), nodeSelector={TPU_ACCELERATOR: accelerator, TPU_TOPOLOGY: topology}
    )
    return m.worker_group(
        name,
        pod,
        replicas=replicas,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        hosts=hosts,
    )


def gpu_group(
    name: str = "nvl", *, replicas: int = 0, max_replicas: int = 2, hosts: int = 4
) -> dict[str, Any]:
    """A GB200 NVLink group: one slice = `hosts` pods of 4 GPUs sharing one clique."""
    pod = m.template(ray_container({"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "4"}))
    return m.worker_group(
        name, pod, replicas=replicas, min_replicas=0, max_replicas=max_replicas, hosts=hosts
    )


def cpu_group(
    name: str = "cpu", *, replicas: int = 0, min_replicas: int = 0, max_replicas: int = 4
) -> dict[str, Any]:
    pod = m.template(ray_container({"cpu": "1", "memory": "1Gi"}))
    return m.worker_group(
        name, pod, replicas=replicas, min_replicas=min_replicas, max_replicas=max_replicas
    )


def raycluster(name: str, *groups: dict[str, Any], autoscaling: bool = True) -> dict[str, Any]:
    head = m.container(
        "ray-head", limits={"cpu": "1", "memory": "2Gi"}, requests={"cpu": "1", "memory": "2Gi"}
    )
    return m.raycluster(
        name,
        m.head_group(head, {"dashboard-host": "0.0.0.0"}),
        [copy.deepcopy(g) for g in groups],
        namespace=None,
        enableInTreeAutoscaling=autoscaling,
    )


# ---------------------------------------------------------------- pod views


def workers(pods: list[dict[str, Any]], group: str) -> list[dict[str, Any]]:
    """Live (not terminating) worker pods of a group."""
    return [
        p
        for p in pods
        if labels(p).get("ray.io/group") == group
        and labels(p).get("ray.io/node-type") == "worker"
        and not is_terminating(p)
    ]


def slices(pods: list[dict[str, Any]], group: str) -> dict[str, list[dict[str, Any]]]:
    """Live worker pods of a group by replica name, each list in host order."""
    out: dict[str, list[dict[str, Any]]] = {}
    for pod in workers(pods, group):
        out.setdefault(labels(pod).get(REPLICA_NAME, ""), []).append(pod)
    for members in out.values():
        members.sort(key=lambda p: int(labels(p).get(HOST_INDEX, "0")))
    return out


def complete_slices(
    pods: list[dict[str, Any]], group: str, hosts: int, *, running: bool = False
) -> dict[int, list[dict[str, Any]]]:
    """Slices with exactly one live pod per host index, keyed by replica index.

    Raises if a replica name is shared by two indices (that would be a labelling bug).
    """
    out: dict[int, list[dict[str, Any]]] = {}
    for name, members in slices(pods, group).items():
        hosts_seen = [labels(p).get(HOST_INDEX) for p in members]
        if not name or hosts_seen != [str(h) for h in range(hosts)]:
            continue
        if running and not all(is_running(p) for p in members):
            continue
        indices = {labels(p)[REPLICA_INDEX] for p in members}
        assert len(indices) == 1, f"slice {name} spans replica indices {indices}"
        index = int(indices.pop())
        assert index not in out, f"two live slices share replica index {index}"
        out[index] = members
    return out


class Kit:
    """Manifest builders and pod views for the tests (this directory is not a package)."""

    raycluster = staticmethod(raycluster)
    tpu_group = staticmethod(tpu_group)
    cpu_group = staticmethod(cpu_group)
    gpu_group = staticmethod(gpu_group)
    labels = staticmethod(labels)
    is_terminating = staticmethod(is_terminating)
    is_running = staticmethod(is_running)
    workers = staticmethod(workers)
    slices = staticmethod(slices)
    complete_slices = staticmethod(complete_slices)
    REPLICA_NAME = REPLICA_NAME
    REPLICA_INDEX = REPLICA_INDEX
    HOST_INDEX = HOST_INDEX


@pytest.fixture
def kit() -> type[Kit]:
    return Kit


@pytest.fixture
def corrected(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Ray as the autoscaler sidecar runs it: `slice_autoscaler.install()` applied, undone when
    the test ends (monkeypatch restores every attribute it saved)."""
    from raycluster_operator.sidecar import slice_autoscaler

    producer = importlib.import_module(CONFIG_PRODUCER).AutoscalingConfigProducer
    provider = importlib.import_module(CLOUD_PROVIDER).KubeRayProvider
    monkeypatch.setattr(producer, "__call__", producer.__call__)
    monkeypatch.setattr(provider, "_initialize_scale_request", provider._initialize_scale_request)
    scheduler = importlib.import_module("ray.autoscaler.v2.scheduler").ResourceDemandScheduler
    for name in ("_enforce_idle_termination", "_enforce_min_workers_per_type"):
        monkeypatch.setattr(scheduler, name, scheduler.__dict__[name])
    monkeypatch.setattr(producer, "_slice_scaling", False, raising=False)
    assert slice_autoscaler.install()
    yield
