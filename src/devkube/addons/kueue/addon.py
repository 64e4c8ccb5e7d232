"""Kueue's manager as a local process beside Kubernetes' own control plane (docs/design.md §8.4).

Started once the cluster is up and the kinds it queues are served (its integrations set up
their controllers at start; a kind that appears later is waited for with a backoff), it is
installed as its release's manifests install it (CRDs, the ServiceAccount and its RBAC, the
webhook configurations) and runs as that ServiceAccount, with a token from the TokenRequest
API. `start` returns once kube-apiserver calls its webhooks: a RayCluster created after that
is suspended by Kueue on create. It also ships the `Topology` of the simulated TPU nodes
(`manifests.TOPOLOGY`) for Topology Aware Scheduling.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import yaml

from devkube.controlplane import build, pki
from devkube.controlplane.kube import free_port
from devkube.controlplane.process import Child, ProcessDied
from devkube.machinery.client import ApiError, resource_path

from . import manifests

if TYPE_CHECKING:
    from devkube.cluster import DevCluster

log = logging.getLogger(__name__)

MODULE = "kueue"  # src/devkube/controlplane/gomod/kueue
SOURCE = "sigs.k8s.io/kueue"
#: The release's own check for its certificates, a path no option moves while internal
#: certificate management is off (cmd/kueue/main.go): a private mount namespace shows it.
METRICS_CERTS = "kueue/metrics/certs"
#: Mount an overlay on /etc whose upper layer holds METRICS_CERTS, then become Kueue.
_WRAP = (
    'mount -t overlay overlay -o "lowerdir=/etc,upperdir=$RCO_UPPER,workdir=$RCO_WORK" /etc '
    '&& exec "$0" "$@"'
)


def kueue_available() -> tuple[bool, str]:
    """Whether Kueue can run here, and why not: its private mount namespace needs root and
    util-linux's unshare (the process runtime's own needs, devkube/process/sandbox.py)."""
    if os.geteuid() != 0:
        return False, "kueue runs in a private mount namespace: needs root"
    if shutil.which("unshare") is None:
        return False, "kueue runs in a private mount namespace: needs util-linux's unshare"
    return True, "root and unshare are available"


def _lay_out(cluster_pki: pki.ControlPlanePki) -> Path:
    """Kueue's directory (on /dev/shm where there is one): its serving certificate, signed
    by the cluster CA, in certs/, and the same as the metrics certificate in the /etc layer."""
    shm = Path("/dev/shm")
    root = Path(tempfile.mkdtemp(prefix="rco-kueue-", dir=shm if shm.is_dir() else None))
    certs, metrics = root / "certs", root / "etc" / METRICS_CERTS
    for folder in (certs, metrics, root / "work"):
        folder.mkdir(parents=True)
    pki.serving_cert(cluster_pki, certs / "tls.crt", certs / "tls.key", "127.0.0.1", "localhost")
    for name in ("tls.crt", "tls.key"):
        shutil.copy(certs / name, metrics / name)
    return root


class KueueError(RuntimeError):
    """Kueue did not come up; the message says what and ends with its log's tail."""


class Kueue:
    """The `Addon` (devkube.cluster) that runs Kueue; `start` after the CRDs of the kinds it
    should queue are applied."""

    def __init__(self, *, within: float = 60.0) -> None:
        self.within = within
        self.directory: Path | None = None
        self.webhook_port = 0
        self.timings: dict[str, float] = {}
        self._child: Child | None = None

    @property
    def log_path(self) -> Path | None:
        return self._child.log_path if self._child else None

    async def start(self, cluster: DevCluster) -> None:
        started = time.monotonic()
        kube = cluster.kube  # Kueue needs a real API server: raises on the embedded one
        built = await asyncio.to_thread(build.ensure_built, MODULE)
        source = await asyncio.to_thread(build.source_dir, MODULE, SOURCE)
        components = source / "config" / "components"
        self.timings["built"] = time.monotonic() - started
        self.webhook_port, health_port = free_port(), free_port()
        url = f"https://127.0.0.1:{self.webhook_port}"
        root = self.directory = await asyncio.to_thread(_lay_out, kube.pki_files)
        certs, upper = root / "certs", root / "etc"
        await self._install(cluster, components, url)
        kubeconfig = root / "kubeconfig"
        kubeconfig.write_text(
            yaml.safe_dump(
                await cluster.service_account_kubeconfig(
                    manifests.NAMESPACE, manifests.SERVICE_ACCOUNT
                )
            )
        )
        config = root / "config.yaml"
        config.write_text(
            yaml.safe_dump(
                manifests.configuration(
                    webhook_port=self.webhook_port, cert_dir=certs, health_port=health_port
                )
            )
        )
        argv = [
            "unshare", "--mount", "--propagation", "private", "--",
            "/bin/sh", "-c", _WRAP,
            str(built.path("kueue")),
            f"--config={config}",
            f"--kubeconfig={kubeconfig}",
            "--zap-log-level=info",
        ]  # fmt: skip
        self._child = Child(
            "kueue",
            argv,
            root / "kueue.log",
            env={"RCO_UPPER": str(upper), "RCO_WORK": str(root / "work")},
        )
        await self._child.start()
        await self._ready(f"http://127.0.0.1:{health_port}/readyz")
        self.timings["ready"] = time.monotonic() - started
        for doc in manifests.webhooks(components, url=url, ca_pem=kube.ca_pem):
            await cluster.apply(doc)
        await self._webhooks_called(cluster)
        await cluster.apply(manifests.topology())
        self.timings["webhooks"] = time.monotonic() - started
        log.info("kueue up in %.1f s, webhooks on %s", self.timings["webhooks"], url)

    async def stop(self) -> None:
        if self._child is not None:
            await self._child.stop()
            self._child = None
        if self.directory is not None:
            await asyncio.to_thread(shutil.rmtree, self.directory, True)
            self.directory = None

    def check(self) -> None:
        """Raise if Kueue has died (a test's failure then says so, with its log)."""
        if self._child is not None:
            self._child.check()

    async def _install(self, cluster: DevCluster, components: Path, url: str) -> None:
        await cluster.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": manifests.NAMESPACE}}
        )
        crds = manifests.crds(components, url=url, ca_pem=cluster.ca_pem)
        for crd in crds:
            await cluster.apply(crd)
        for crd in crds:
            await self._established(cluster, crd["metadata"]["name"])
        for doc in manifests.rbac(components):
            await cluster.apply(doc, namespace=manifests.NAMESPACE)

    async def _established(self, cluster: DevCluster, name: str) -> None:
        path = resource_path("apiextensions.k8s.io/v1", "customresourcedefinitions", None, name)
        deadline = time.monotonic() + self.within
        while time.monotonic() < deadline:
            crd = await cluster.client.get(path)
            conditions = (crd.get("status") or {}).get("conditions") or []
            if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                return
            await asyncio.sleep(0.1)
        raise KueueError(f"CRD {name} not Established within {self.within:.0f} s")

    async def _ready(self, url: str) -> None:
        assert self._child is not None
        deadline = time.monotonic() + self.within
        last = ""
        async with aiohttp.ClientSession() as session:
            while time.monotonic() < deadline:
                try:
                    self._child.check()
                except ProcessDied as error:
                    raise KueueError(str(error)) from None
                try:
                    async with session.get(url) as answer:
                        if answer.status == 200:
                            return
                        last = f"{answer.status}: {(await answer.text())[-300:]}"
                except aiohttp.ClientError as error:
                    last = str(error)
                await asyncio.sleep(0.2)
        raise KueueError(f"kueue not ready within {self.within:.0f} s ({last})\n{self._tail()}")

    async def _webhooks_called(self, cluster: DevCluster) -> None:
        """Until kube-apiserver has picked the configurations up: a dry-run create of a
        queued RayCluster comes back suspended (Kueue's defaulting webhook did it). Skipped
        when RayClusters are not served."""
        path = resource_path("ray.io/v1", "rayclusters", "default")
        probe: dict[str, Any] = {
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "metadata": {
                "name": "kueue-webhook-probe",
                "labels": {"kueue.x-k8s.io/queue-name": "kueue-webhook-probe"},
            },
            "spec": {
                "headGroupSpec": {
                    "rayStartParams": {},
                    "template": {"spec": {"containers": [{"name": "ray-head", "image": "x"}]}},
                }
            },
        }
        deadline = time.monotonic() + self.within
        last = ""
        while time.monotonic() < deadline:
            self.check()
            try:
                answer = await cluster.client.request(
                    "POST", path, params={"dryRun": "All"}, body=probe
                )
            except ApiError as error:
                if error.status == 404:
                    return  # RayClusters not served: nothing to probe with
                last = str(error)
            else:
                if (answer.get("spec") or {}).get("suspend") is True:
                    return
                last = "the dry-run RayCluster came back unsuspended"
            await asyncio.sleep(0.1)
        raise KueueError(f"kueue's webhooks not called within {self.within:.0f} s ({last})")

    def _tail(self) -> str:
        return self._child.tail() if self._child else ""
