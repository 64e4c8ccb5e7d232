"""Real Helm for the chart's tests: the `helm` binary built once from the Go module proxy
(src/devkube/controlplane/gomod/helm, pinned like the control plane: docs/design.md §3.11),
run with a HOME of the test's own so no user's repositories, plugins or caches leak in.

Where it cannot be built (no Go toolchain) a test skips with the reason; under CI=true it fails
instead, as the real-Kubernetes tier does (control_planes.require)."""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from devkube.controlplane import build

from .control_planes import in_ci
from .examples import DEPLOY

CHART = DEPLOY / "helm" / "raycluster-operator"
NO_HELM = (
    "helm was not built: no Go toolchain on PATH (install Go >= 1.26; the chart's tests build "
    "helm.sh/helm/v4's cmd/helm once from the Go module proxy, "
    "src/devkube/controlplane/gomod/helm)"
)


@functools.cache
def _built() -> str:
    """The helm binary's path, built now if the cache lacks it; '' without Go (a failed build
    raises: never a silent skip)."""
    if shutil.which("go") is None:
        return ""
    return str(build.ensure_built("helm").path("helm"))


def helm_binary() -> str:
    found = _built()
    if not found:
        if in_ci():
            pytest.fail(NO_HELM)
        pytest.skip(NO_HELM)
    return found


class Helm:
    """`helm` with its own environment: PATH, its HOME and XDG folders under `home`, and the
    cluster's kubeconfig when there is one."""

    within: float = 180

    def __init__(self, home: Path, kubeconfig: Path | None = None) -> None:
        self.binary = helm_binary()
        self.env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(home),
            "HELM_CACHE_HOME": str(home / "helm-cache"),
            "HELM_CONFIG_HOME": str(home / "helm-config"),
            "HELM_DATA_HOME": str(home / "helm-data"),
        }
        if kubeconfig is not None:
            self.env["KUBECONFIG"] = str(kubeconfig)

    def __call__(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        """Run helm to the end (no cluster on this process's event loop to starve)."""
        done = subprocess.run(
            [self.binary, *args], env=self.env, capture_output=True, text=True, timeout=self.within
        )
        if ok:
            assert done.returncode == 0, f"helm {' '.join(args)} failed: {done.stderr}"
        return done

    async def run(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        """Run helm without blocking the event loop (the dev cluster's kubelets run on it)."""
        process = await asyncio.create_subprocess_exec(
            self.binary,
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.env,
        )
        async with asyncio.timeout(self.within):
            out, err = await process.communicate()
        done = subprocess.CompletedProcess(
            [self.binary, *args], process.returncode or 0, out.decode(), err.decode()
        )
        if ok:
            assert done.returncode == 0, f"helm {' '.join(args)} failed: {done.stderr}"
        return done
