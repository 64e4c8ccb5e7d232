"""`raycluster-operator dev`."""

from __future__ import annotations

import click


@click.command(name="dev")
def dev() -> None:
    """Not available yet."""
    raise click.ClickException("'dev' is not available yet")
