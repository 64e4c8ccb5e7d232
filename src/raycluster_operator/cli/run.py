"""`raycluster-operator run`."""

from __future__ import annotations

import click


@click.command(name="run")
def run() -> None:
    """Not available yet."""
    raise click.ClickException("'run' is not available yet")
