"""The `raycluster-operator` command line: run, dev, plan, manifests."""

from __future__ import annotations

import click

from raycluster_operator import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="raycluster-operator")
def main() -> None:
    """A Kubernetes operator for KubeRay RayClusters with atomic multi-host worker groups."""


def _register() -> None:
    # Each command lives in its own module, named for what it does.
    from raycluster_operator.cli import dev, manifests, plan, run

    main.add_command(plan.plan)
    main.add_command(manifests.manifests)
    main.add_command(dev.dev)
    main.add_command(run.run)


_register()
