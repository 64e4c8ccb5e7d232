"""Which control plane a world runs on (docs/design.md §8.2): the embedded dev server, or
Kubernetes' own binaries with our kubelets joined as nodes.

A test module that runs on both says `pytestmark = pytest.mark.control_planes`, and its worlds
take the `control_plane` fixture (tests/conftest.py parametrizes it per module, so each
backend's world is started once). A test of such a module that cannot run on Kubernetes says
why with `pytest.mark.embedded_only("reason")`: that reason is its skip reason there, and the
README's compatibility table lists it.
"""

from __future__ import annotations

import functools
import os
import shutil

import pytest

from devkube.controlplane import build

EMBEDDED = "embedded"
KUBERNETES = "kubernetes"
BOTH = (EMBEDDED, KUBERNETES)
NO_TIER = (
    "the real-Kubernetes tier did not run: no Go toolchain on PATH (install Go >= 1.26 and run "
    "`make test` again; it builds kube-apiserver, kube-controller-manager, kube-scheduler and "
    "etcd once from the Go module proxy)"
)


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@functools.cache
def _built() -> str:
    """'' once the binaries are in the cache (built now if needed), else why not."""
    if shutil.which("go") is None:
        return NO_TIER
    for module in build.CONTROL_PLANE:
        build.ensure_built(module)  # a failed build raises: never a silent skip
    return ""


def require(control_plane: str) -> None:
    """Skip (outside CI) or fail (CI=true) a Kubernetes world that cannot be had here."""
    if control_plane != KUBERNETES:
        return
    why = _built()
    if why:
        if in_ci():
            pytest.fail(why)
        pytest.skip(why)
