"""The dev cluster for tests: started with options, stopped reliably, and the pieces for
clients that live outside its event loop (a loop thread, a CA, a kubeconfig on disk)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import threading
from collections.abc import AsyncIterator, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml

from devkube import DevCluster
from devkube.server.app import ApiServer

T = TypeVar("T")
#: Short kubelet steps: a test waits for states, and these reach them quickly.
FAST_KUBELET = 0.05


async def start_dev_cluster(
    nodes: Sequence[str] | None = None,
    *,
    runtime: Any = "simulated",
    kubelet_delay: float = FAST_KUBELET,
    crds: Sequence[Mapping[str, Any]] = (),
    **options: Any,
) -> DevCluster:
    """A started DevCluster (``options`` are DevCluster's: node_grace, termination_cap, port,
    faults, ...) with ``crds`` applied; stopped again if applying them fails."""
    cluster = DevCluster(nodes=nodes, runtime=runtime, kubelet_delay=kubelet_delay, **options)
    await cluster.start()
    try:
        # At once: kube-apiserver establishes each CRD some 5 s after accepting its names.
        await asyncio.gather(*(cluster.apply(crd) for crd in crds))
    except BaseException:
        await stop_dev_cluster(cluster)
        raise
    return cluster


@contextlib.asynccontextmanager
async def running_cluster(
    nodes: Sequence[str] | None = None,
    *,
    runtime: Any = "simulated",
    kubelet_delay: float = FAST_KUBELET,
    crds: Sequence[Mapping[str, Any]] = (),
    patience: float = 5.0,
    **options: Any,
) -> AsyncIterator[DevCluster]:
    """`start_dev_cluster` ... `stop_dev_cluster` as a block: the way a test (or a fixture)
    that needs a cluster of its own starts one."""
    cluster = await start_dev_cluster(
        nodes, runtime=runtime, kubelet_delay=kubelet_delay, crds=crds, **options
    )
    try:
        yield cluster
    finally:
        await stop_dev_cluster(cluster, patience)


async def stop_dev_cluster(cluster: DevCluster, patience: float = 5.0) -> None:
    """Stop the dev cluster. Its GC loop can swallow one cancellation (Python 3.11's
    ``asyncio.wait_for`` race), so after `patience` seconds its task (named "devcluster gc")
    is cancelled again, every second, while the stop is pending."""
    stopping = asyncio.ensure_future(cluster.stop())
    done, _ = await asyncio.wait({stopping}, timeout=patience)
    while not done:
        for task in asyncio.all_tasks():
            if task.get_name() == "devcluster gc":
                task.cancel()
        done, _ = await asyncio.wait({stopping}, timeout=1)
    stopping.result()


class LoopThread:
    """An asyncio loop in a daemon thread, so blocking clients (the official `kubernetes`
    client, Ray's `requests`-based ones) never stall the server they talk to."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        """Run a coroutine on the loop (e.g. to touch the store) and wait for it."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


class ThreadedServer:
    """An `ApiServer` on its own loop thread, for synchronous clients."""

    def __init__(self, **kwargs: Any) -> None:
        self.server = ApiServer(**kwargs)
        self._loop: LoopThread | None = None

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        assert self._loop is not None, "not started"
        return self._loop.run(coro, timeout=30)

    def __enter__(self) -> ApiServer:
        self._loop = LoopThread()
        self.run(self.server.start())
        return self.server

    def __exit__(self, *exc: object) -> None:
        self.run(self.server.stop())
        assert self._loop is not None
        self._loop.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def client_ssl_context(server: ApiServer) -> ssl.SSLContext:
    """An SSL context that trusts exactly this server's CA."""
    return ssl.create_default_context(cadata=server.ca_pem.decode())


def write_kubeconfig(server: ApiServer, path: Path, context: str = "dev") -> Path:
    path.write_text(yaml.safe_dump(server.kubeconfig_dict(context)))
    return path


def write_ca(server: Any, path: Path) -> Path:
    path.write_bytes(server.ca_pem)
    return path
