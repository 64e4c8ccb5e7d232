"""Shared fixtures: a running dev cluster, a kubeconfig for it, and the real kubectl (the
pieces live in harness/)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from devkube import DevCluster
from harness import kubectl as kubectl_bin
from harness import waiting


@pytest.fixture
async def dev_cluster() -> AsyncIterator[DevCluster]:
    """A started dev cluster with the default nodes (2 v6e 4x4 pools, a GB200 domain, 4 CPU)."""
    async with DevCluster() as cluster:
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
