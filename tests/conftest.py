"""Shared fixtures: a running dev cluster, a kubeconfig for it, and the real kubectl (the
pieces live in tests/harness/)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from devkube import DevCluster
from tests.harness import kubectl as kubectl_bin
from tests.harness import waiting
from tests.harness.cluster import running_cluster


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files holding a test marked `slow` run first: under `make test` each file stays on one
    worker (`--dist loadfile`), and a long file started last would run on alone at the end."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)  # stable: the rest keeps its order


@pytest.fixture
async def dev_cluster() -> AsyncIterator[DevCluster]:
    """A started dev cluster with the default nodes (2 v6e 4x4 pools, a GB200 domain, 4 CPU)."""
    async with running_cluster(kubelet_delay=0.2) as cluster:
        yield cluster


@pytest.fixture
def kubeconfig_path(dev_cluster: DevCluster, tmp_path: Path) -> Path:
    return dev_cluster.write_kubeconfig(tmp_path / "kubeconfig")


Kubectl = kubectl_bin.Run


@pytest.fixture
def kubectl(kubeconfig_path: Path) -> Kubectl:
    """`await kubectl("get", "pods", "-o", "json")`: runs the real kubectl against the dev
    cluster without blocking the event loop the cluster runs on."""
    return kubectl_bin.runner(kubeconfig_path)


Eventually = Callable[..., Awaitable[None]]


@pytest.fixture
def eventually() -> Eventually:
    """`await eventually(check)`: retry an async assertion until it passes. The timeout only
    turns a hang into a failure; it is not a performance limit."""

    return waiting.eventually
