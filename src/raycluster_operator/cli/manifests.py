"""`raycluster-operator manifests`."""

from __future__ import annotations

import click


@click.command(name="manifests")
def manifests() -> None:
    """Not available yet."""
    raise click.ClickException("'manifests' is not available yet")
