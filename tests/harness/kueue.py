"""Kueue beside a dev cluster on Kubernetes' own control plane (devkube.addons.kueue): started
once the ray.io CRDs are served, stopped before the cluster. Where it cannot run (no Go, no
root for its private mount namespace) a test skips, and fails under CI=true."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest

from devkube import DevCluster, Kueue, kueue_available
from tests.harness import control_planes


def require_kueue() -> None:
    control_planes.require(control_planes.KUBERNETES)
    ok, why = kueue_available()
    if not ok:
        if control_planes.in_ci():
            pytest.fail(why)
        pytest.skip(why)


@contextlib.asynccontextmanager
async def running_kueue(cluster: DevCluster) -> AsyncIterator[Kueue]:
    kueue = Kueue()
    try:
        await kueue.start(cluster)
        yield kueue
    finally:
        await kueue.stop()
