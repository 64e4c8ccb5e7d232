"""`raycluster-operator manifests`: print what an installation applies.

A click group so that more manifests (``all``: CRD, RBAC, Deployment) can join ``crd``.
"""

from __future__ import annotations

import json
from typing import Any

import click
import yaml

from raycluster_operator.api.crd import crd_manifest

_FORMAT = click.option(
    "-o",
    "--output",
    type=click.Choice(["yaml", "json"]),
    default="yaml",
    show_default=True,
    help="Output format.",
)


def render(objects: list[dict[str, Any]], output: str) -> str:
    """YAML documents separated by ``---``, or one JSON object (a ``List`` when several)."""
    if output == "json":
        body: dict[str, Any] = (
            objects[0]
            if len(objects) == 1
            else {"apiVersion": "v1", "kind": "List", "items": objects}
        )
        return json.dumps(body, indent=2) + "\n"
    return yaml.safe_dump_all(objects, sort_keys=False)


@click.group(name="manifests")
def manifests() -> None:
    """Print Kubernetes manifests for installing the operator."""


@manifests.command(name="crd")
@_FORMAT
def crd(output: str) -> None:
    """The rayclusters.ray.io CustomResourceDefinition (kubectl apply -f -)."""
    click.echo(render([crd_manifest()], output), nl=False)
