"""`raycluster-operator manifests`: print what an installation applies.

``all`` prints the same objects as ``kubectl kustomize deploy/overlays/cluster`` (and, with
``--watch-namespace ray``, as ``deploy/overlays/namespaced``); deploy/generate.py writes the
kustomize base from the same code.
"""

from __future__ import annotations

import json
from typing import Any

import click
import yaml

from raycluster_operator.controller.crds import (
    crd_manifest,
    rayjob_crd_manifest,
    rayservice_crd_manifest,
)

_FORMAT = click.option(
    "-o",
    "--output",
    type=click.Choice(["yaml", "json"]),
    default="yaml",
    show_default=True,
    help="Output format.",
)


try:  # libyaml's emitter: the same bytes (deploy/generate.py's files), a quarter of the CPU
    from yaml import CSafeDumper as _Emitter
except ImportError:  # a PyYAML built without libyaml
    from yaml import SafeDumper as _Emitter  # type: ignore[assignment]


class _PlainDumper(_Emitter):
    """No ``&id001``/``*id001`` anchors for values shared in memory (the Deployment's labels
    and selector): plain YAML that every tool, kustomize included, reads the same way. The
    CRDs are 1.3 MB of YAML: the pure-Python emitter takes about 1 s of CPU to write them."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def render(objects: list[dict[str, Any]], output: str) -> str:
    """YAML documents separated by ``---``, or one JSON object (a ``List`` when several)."""
    if output == "json":
        body: dict[str, Any] = (
            objects[0]
            if len(objects) == 1
            else {"apiVersion": "v1", "kind": "List", "items": objects}
        )
        return json.dumps(body, indent=2) + "\n"
    return yaml.dump_all(objects, Dumper=_PlainDumper, sort_keys=False)


@click.group(name="manifests")
def manifests() -> None:
    """Print Kubernetes manifests for installing the operator."""


@manifests.command(name="crd")
@_FORMAT
def crd(output: str) -> None:
    """The rayclusters.ray.io CustomResourceDefinition (kubectl apply -f -).

    It is KubeRay v1.6's schema plus our additions (descriptions start with EXTENSION:
    spec.idleSuspend, spec.idleTerminationOptions, the status slice counts), so it can replace
    KubeRay's CRD: kubectl apply --server-side --force-conflicts -f -.

    \b
    Already running KubeRay's CRD? You need not apply this one: the operator works under it.
    The API server then prunes our additions (status shows pod counts only); the operator
    compares status after that pruning (it reads the installed CRD: get on
    customresourcedefinitions/rayclusters.ray.io, in deploy/base/rbac.yaml; a namespaced install
    learns the pruning from its first status write) and reports a pruned spec extension with
    a SpecFieldsPruned Warning Event.
    """
    click.echo(render([crd_manifest()], output), nl=False)


@manifests.command(name="rayjob-crd")
@_FORMAT
def rayjob_crd(output: str) -> None:
    """The rayjobs.ray.io CustomResourceDefinition (kubectl apply -f -).

    KubeRay's RayJob schema (same fields, defaults, enums, CEL rules, printer columns) with
    our RayCluster spec embedded, plus spec.sliceFailurePolicy and status.sliceFailures
    (descriptions start with EXTENSION).
    """
    click.echo(render([rayjob_crd_manifest()], output), nl=False)


@manifests.command(name="rayservice-crd")
@_FORMAT
def rayservice_crd(output: str) -> None:
    """The rayservices.ray.io CustomResourceDefinition (kubectl apply -f -).

    KubeRay v1.7's RayService schema (same fields, defaults, CEL rules, printer columns) with
    our RayCluster spec and status embedded.
    """
    click.echo(render([rayservice_crd_manifest()], output), nl=False)


@manifests.command(name="all")
@_FORMAT
@click.option("--namespace", default="raycluster-operator", show_default=True)
@click.option("--image", default=None, help="Operator image (default: this version's).")
@click.option(
    "--watch-namespace",
    "watched",
    multiple=True,
    help="Namespaced install: a Role per watched namespace instead of a ClusterRole.",
)
def all_manifests(output: str, namespace: str, image: str | None, watched: tuple[str, ...]) -> None:
    """CRDs, namespace, service account, least-privilege RBAC, Deployment, metrics Service."""
    from raycluster_operator.controller.install import DEFAULT_IMAGE, operator_manifests

    objects = [
        crd_manifest(),
        rayjob_crd_manifest(),
        rayservice_crd_manifest(),
        *operator_manifests(namespace, image or DEFAULT_IMAGE, list(watched) or None),
    ]
    click.echo(render(objects, output), nl=False)
