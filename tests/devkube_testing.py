"""Test helpers for talking to a devkube `ApiServer` from outside its process (not shipped:
they live with the tests that use them)."""

from __future__ import annotations

import asyncio
import ssl
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import yaml

from devkube import DevCluster
from devkube.server.app import ApiServer

T = TypeVar("T")


def client_ssl_context(server: ApiServer) -> ssl.SSLContext:
    """An SSL context that trusts exactly this server's CA."""
    return ssl.create_default_context(cadata=server.ca_pem.decode())


def write_kubeconfig(server: ApiServer, path: Path, context: str = "dev") -> Path:
    path.write_text(yaml.safe_dump(server.kubeconfig_dict(context)))
    return path


def write_ca(server: ApiServer, path: Path) -> Path:
    path.write_bytes(server.ca_pem)
    return path


class ThreadedServer:
    """An `ApiServer` on its own event loop thread, for synchronous clients (the official
    `kubernetes` client, Ray's `requests`-based client) that would block an in-loop server."""

    def __init__(self, **kwargs: Any) -> None:
        self.server = ApiServer(**kwargs)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the server's loop (e.g. to touch the store) and wait for it."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=30)

    def __enter__(self) -> ApiServer:
        self._thread.start()
        self.run(self.server.start())
        return self.server

    def __exit__(self, *exc: object) -> None:
        self.run(self.server.stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


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
