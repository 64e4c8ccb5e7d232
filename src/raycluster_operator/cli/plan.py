"""`raycluster-operator plan`."""

from __future__ import annotations

import click


@click.command(name="plan")
def plan() -> None:
    """Not available yet."""
    raise click.ClickException("'plan' is not available yet")
