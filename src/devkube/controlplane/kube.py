"""Kubernetes' own control plane on this machine: etcd, kube-apiserver, kube-controller-manager
and kube-scheduler, started with the flags of a kubeadm-made v1.37 cluster (docs/design.md
§8.2). It serves what `devkube.server.ApiServer` serves to the rest of a `DevCluster` (a URL,
the admin's token, the CA, kubeconfigs), so the same kubelets, addons, operator and tests run
on either.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import socket
import ssl
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from devkube.machinery.kubeconfig import kubeconfig_dict

from . import build, pki
from .process import Child, ProcessDied

log = logging.getLogger(__name__)

#: kubeadm's own list on top of the controller manager's defaults.
CONTROLLERS = "*,bootstrapsigner,tokencleaner"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class ControlPlaneError(RuntimeError):
    """The control plane did not come up; the message says which part and why."""


class KubeControlPlane:
    """Started by `start()`, stopped by `stop()`; its files live in a temporary directory
    (etcd's data on /dev/shm where there is one: no disk syncs in a test)."""

    def __init__(
        self,
        *,
        node_names: Sequence[str],
        node_grace: float = 40.0,
        host: str = "127.0.0.1",
        port: int = 0,
        extra_sans: Iterable[str] = (),
        pod_gc_threshold: int = 12500,
    ) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.node_names = list(node_names)
        self.node_grace = node_grace
        self.extra_sans = tuple(extra_sans)
        self.pod_gc_threshold = pod_gc_threshold
        #: An address pods reach the API on (the process runtime's bridge gateway): the
        #: apiserver then listens on every address and advertises that one.
        self.also_listen = ""
        shm = Path("/dev/shm")
        self.directory = Path(
            tempfile.mkdtemp(prefix="rco-kube-", dir=shm if shm.is_dir() else None)
        )
        self._pki: pki.ControlPlanePki | None = None
        self._children: list[Child] = []
        #: Seconds from `start()` to each milestone, for the README's start figure.
        self.timings: dict[str, float] = {}

    # --- what a DevCluster reads -------------------------------------------------------

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    @property
    def ca_pem(self) -> bytes:
        return self._require_pki().ca_pem

    @property
    def token(self) -> str:
        return self._require_pki().token(pki.ADMIN[0])

    def node_token(self, node: str) -> str:
        return self._require_pki().token(pki.node_user(node)[0])

    def kubeconfig_dict(
        self, context: str = "dev", *, token: str | None = None, namespace: str = "default"
    ) -> dict[str, Any]:
        return kubeconfig_dict(
            self.url, self.ca_pem, token or self.token, context=context, namespace=namespace
        )

    def kubelet_tls(self) -> ssl.SSLContext:
        """The kubelet API's side of TLS: its serving certificate from the cluster CA, and
        kube-apiserver's client certificate (the same CA) checked when one is presented; the
        kubelet API answers 401 to a caller that presents none (devkube/kubelet/api.py)."""
        p = self._require_pki()
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(p.ca_file))
        context.load_cert_chain(p.path("kubelet.crt"), p.path("kubelet.key"))
        context.verify_mode = ssl.CERT_OPTIONAL
        return context

    def logs(self) -> dict[str, Path]:
        """Each binary's log file, by name (a failing test prints their tails)."""
        return {child.name: child.log_path for child in self._children}

    @property
    def pki_files(self) -> pki.ControlPlanePki:
        """The CA and its files, for a server beside the control plane that kube-apiserver
        must trust (an add-on's webhooks: `pki.serving_cert`)."""
        return self._require_pki()

    def _require_pki(self) -> pki.ControlPlanePki:
        if self._pki is None:
            raise RuntimeError("the control plane is not started")
        return self._pki

    # --- lifetime ----------------------------------------------------------------------

    async def start(self) -> None:
        started = time.monotonic()
        etcd, kubernetes = await asyncio.gather(
            asyncio.to_thread(build.ensure_built, "etcd"),
            asyncio.to_thread(build.ensure_built, "kubernetes"),
        )
        self.timings["built"] = time.monotonic() - started
        self._pki = pki.mint(
            self.directory / "pki", node_names=self.node_names, extra_sans=self.extra_sans
        )
        etcd_port = free_port()
        await self._spawn("etcd", self._etcd_argv(etcd.path("server"), etcd_port))
        await self._wait_http(f"http://127.0.0.1:{etcd_port}/health", "etcd", 30)
        self.timings["etcd"] = time.monotonic() - started
        await self._spawn(
            "kube-apiserver",
            self._apiserver_argv(kubernetes.path("kube-apiserver"), etcd_port),
        )
        await self._wait_http(f"{self.url}/readyz", "kube-apiserver", 60)
        self.timings["apiserver"] = time.monotonic() - started
        await self._spawn(
            "kube-controller-manager",
            self._controller_manager_argv(kubernetes.path("kube-controller-manager")),
        )
        await self._spawn("kube-scheduler", self._scheduler_argv(kubernetes.path("kube-scheduler")))
        log.info("control plane up at %s in %.1f s", self.url, time.monotonic() - started)

    async def stop(self) -> None:
        for child in reversed(self._children):
            await child.stop()
        self._children.clear()
        await asyncio.to_thread(shutil.rmtree, self.directory, True)

    def check(self) -> None:
        """Raise if a binary has died (a test's failure then names it)."""
        for child in self._children:
            child.check()

    # --- the binaries --------------------------------------------------------------------

    async def _spawn(self, name: str, argv: list[str]) -> None:
        child = Child(name, argv, self.directory / "logs" / f"{name}.log")
        self._children.append(child)
        await child.start()

    def _etcd_argv(self, binary: Path, client_port: int) -> list[str]:
        peer = free_port()
        return [
            str(binary),
            "--name=dev",
            f"--data-dir={self.directory / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{client_port}",
            f"--advertise-client-urls=http://127.0.0.1:{client_port}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=dev=http://127.0.0.1:{peer}",
            # A throwaway store: no fsync, and compaction as kubeadm's etcd has it.
            "--unsafe-no-fsync",
            "--snapshot-count=10000",
            "--log-level=warn",
        ]

    def _apiserver_argv(self, binary: Path, etcd_port: int) -> list[str]:
        p = self._require_pki()
        return [
            str(binary),
            f"--advertise-address={self.also_listen or self.host}",
            f"--bind-address={'0.0.0.0' if self.also_listen else self.host}",
            f"--secure-port={self.port}",
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--allow-privileged=true",
            "--authorization-mode=Node,RBAC",
            # kubeadm's, plus what GKE (whose TPU and GPU pools the nodes imitate) enables:
            # a pod asking for google.com/tpu or nvidia.com/gpu tolerates those nodes' taints.
            "--enable-admission-plugins=NodeRestriction,ExtendedResourceToleration",
            f"--client-ca-file={p.ca_file}",
            f"--token-auth-file={p.path('tokens.csv')}",
            f"--tls-cert-file={p.path('apiserver.crt')}",
            f"--tls-private-key-file={p.path('apiserver.key')}",
            f"--kubelet-client-certificate={p.path('kubelet-client.crt')}",
            f"--kubelet-client-key={p.path('kubelet-client.key')}",
            f"--kubelet-certificate-authority={p.ca_file}",
            "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={p.path('sa.pub')}",
            f"--service-account-signing-key-file={p.path('sa.key')}",
            f"--service-cluster-ip-range={pki.SERVICE_CIDR}",
            f"--cert-dir={self.directory / 'certs'}",
            "--profiling=false",
            "--v=1",
            # The `kubernetes` Service's endpoints may not be loopback; pods of the process
            # runtime reach the API through their hosts file instead (devkube/process).
            *(["--endpoint-reconciler-type=none"] if not self.also_listen else []),
        ]

    def _binary_kubeconfig(self, user: str, name: str) -> Path:
        path = self.directory / f"{name}.kubeconfig"
        token = self._require_pki().token(user)
        path.write_text(yaml.safe_dump(self.kubeconfig_dict(token=token)))
        return path

    def _controller_manager_argv(self, binary: Path) -> list[str]:
        p = self._require_pki()
        grace = max(1, round(self.node_grace))
        return [
            str(binary),
            f"--kubeconfig={self._binary_kubeconfig(pki.CONTROLLER_MANAGER[0], 'kcm')}",
            f"--bind-address={self.host}",
            "--secure-port=0",
            "--leader-elect=false",
            f"--controllers={CONTROLLERS}",
            f"--root-ca-file={p.ca_file}",
            f"--service-account-private-key-file={p.path('sa.key')}",
            "--use-service-account-credentials=true",
            f"--cluster-signing-cert-file={p.ca_file}",
            f"--cluster-signing-key-file={p.path('ca.key')}",
            f"--node-monitor-grace-period={grace}s",
            "--node-monitor-period=1s",
            f"--terminated-pod-gc-threshold={self.pod_gc_threshold}",
            # The dev tier's clients are many and fast; client-go's 20 QPS default would
            # pace the controllers, not the cluster.
            "--kube-api-qps=200",
            "--kube-api-burst=400",
            "--profiling=false",
            "--v=1",
        ]

    def _scheduler_argv(self, binary: Path) -> list[str]:
        return [
            str(binary),
            f"--kubeconfig={self._binary_kubeconfig(pki.SCHEDULER[0], 'scheduler')}",
            f"--bind-address={self.host}",
            "--secure-port=0",
            "--leader-elect=false",
            "--kube-api-qps=200",
            "--kube-api-burst=400",
            "--profiling=false",
            "--v=1",
        ]

    async def _wait_http(self, url: str, name: str, within: float) -> None:
        context = ssl.create_default_context(cadata=self.ca_pem.decode())
        headers = {"Authorization": f"Bearer {self.token}"}
        deadline = time.monotonic() + within
        last = ""
        async with aiohttp.ClientSession() as session:
            while time.monotonic() < deadline:
                for child in self._children:
                    try:
                        child.check()
                    except ProcessDied as error:
                        raise ControlPlaneError(str(error)) from None
                try:
                    async with session.get(url, ssl=context, headers=headers) as answer:
                        if answer.status == 200:
                            return
                        last = f"{answer.status}: {(await answer.text())[-500:]}"
                except aiohttp.ClientError as error:
                    last = str(error)
                await asyncio.sleep(0.1)
        raise ControlPlaneError(f"{name} not ready within {within:.0f} s ({last})")
