"""KubeRay's operator beside a dev cluster: its pinned release built from the Go module proxy
(`gomod/kuberay`), its CRDs and RBAC from its own kustomize base (`manifests.py`), run on this
host as its ServiceAccount (docs/design.md §8.3).

It is an add-on (`DevCluster(addons=[KubeRayOperator(...)])`): it reaches the API only with
the token its kustomize RBAC grants, exactly as its Deployment would in a cluster, so a grant
its base lacks fails here as it would there. `namespaces` is its `--watch-namespace`: the
partition that lets it run beside raycluster-operator (README, "Beside KubeRay").
"""

from __future__ import annotations

import asyncio
import logging
import re
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import yaml

from devkube.controlplane import build
from devkube.controlplane.kube import free_port
from devkube.controlplane.process import Child, ProcessDied

from . import manifests

if TYPE_CHECKING:
    from devkube.cluster import DevCluster

log = logging.getLogger(__name__)

#: The binary `go build` makes of the module root (its `main.go`).
BINARY = "ray-operator"
#: The log line controller-runtime writes once a controller's cache has synced and its workers
#: run: before it, a RayCluster created now would wait for the sync.
STARTED = re.compile(r'"logger":\s*"controllers\.RayCluster",\s*"msg":\s*"Starting workers"')


class KubeRayError(RuntimeError):
    """KubeRay's operator did not come up; the message ends with its log's tail."""


class KubeRayOperator:
    """Started by the dev cluster after its own start, stopped before the cluster stops."""

    def __init__(
        self,
        namespaces: Sequence[str] = (),
        *,
        feature_gates: str = "",
        args: Sequence[str] = (),
        ready_within: float = 60.0,
    ) -> None:
        self.namespaces = tuple(namespaces)
        self.feature_gates = feature_gates
        self.extra_args = tuple(args)
        self.ready_within = ready_within
        self.directory = Path(tempfile.mkdtemp(prefix="rco-kuberay-"))
        self.metrics_port = 0
        self._child: Child | None = None
        #: Seconds from `start()` to the binary built and to its RayCluster workers running.
        self.timings: dict[str, float] = {}

    @property
    def version(self) -> str:
        return manifests.version()

    @property
    def log_path(self) -> Path:
        return self.directory / "kuberay-operator.log"

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child else None

    async def install(self, cluster: DevCluster) -> manifests.Install:
        """KubeRay's CRDs and RBAC only, as `kubectl apply -k config/default` applies them."""
        base = await asyncio.to_thread(manifests.install)
        await cluster.install([*base.crds, *base.rbac])
        return base

    async def start(self, cluster: DevCluster) -> None:
        started = time.monotonic()
        built = await asyncio.to_thread(build.ensure_built, manifests.GOMOD)
        self.timings["built"] = time.monotonic() - started
        base = await self.install(cluster)
        config = await cluster.service_account_kubeconfig(base.namespace, manifests.SERVICE_ACCOUNT)
        kubeconfig = self.directory / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(config))
        self.metrics_port = free_port()
        probe_port = free_port()
        self._child = Child(
            "kuberay-operator",
            [
                str(built.path(BINARY)),
                f"--kubeconfig={kubeconfig}",
                f"--metrics-addr=127.0.0.1:{self.metrics_port}",
                f"--health-probe-bind-address=127.0.0.1:{probe_port}",
                f"--watch-namespace={','.join(self.namespaces)}",
                # In a pod it would be the pod's namespace, where the base's Role is.
                f"--leader-election-namespace={base.namespace}",
                *self._deployment_args(base.deployment),
                *([f"--feature-gates={self.feature_gates}"] if self.feature_gates else []),
                *self.extra_args,
            ],
            self.log_path,
        )
        await self._child.start()
        try:
            await self._wait_started()
        except BaseException:
            await self.stop()  # the cluster stops only the add-ons that started
            raise
        self.timings["started"] = time.monotonic() - started
        log.info(
            "KubeRay %s's operator runs (pid %s, watching %s) in %.1f s",
            self.version,
            self.pid,
            ",".join(self.namespaces) or "every namespace",
            self.timings["started"],
        )

    def _deployment_args(self, deployment: Mapping[str, Any]) -> list[str]:
        """The args its Deployment passes (its feature gates), unless ours name the flag."""
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        ours = {arg.split("=", 1)[0] for arg in self.extra_args}
        if self.feature_gates:
            ours.add("--feature-gates")
        return [str(a) for a in container.get("args") or () if a.split("=", 1)[0] not in ours]

    async def _wait_started(self) -> None:
        assert self._child is not None
        deadline = time.monotonic() + self.ready_within
        while time.monotonic() < deadline:
            try:
                self._child.check()
            except ProcessDied as error:
                raise KubeRayError(str(error)) from None
            text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
            if STARTED.search(text):
                return
            await asyncio.sleep(0.1)
        raise KubeRayError(
            f"KubeRay's RayCluster controller did not start within {self.ready_within:.0f} s; "
            f"its log ends:\n{self._child.tail()}"
        )

    def check(self) -> None:
        """Raise if the operator has died."""
        if self._child is not None:
            self._child.check()

    async def metrics(self) -> str:
        """Its Prometheus text (controller-runtime's: reconciles, client-go's requests)."""
        async with aiohttp.ClientSession() as session:
            url = f"http://127.0.0.1:{self.metrics_port}/metrics"
            async with session.get(url) as answer:
                return await answer.text()

    async def stop(self) -> None:
        if self._child is not None:
            await self._child.stop()
            self._child = None
