"""`raycluster-operator run`: the operator against a real cluster (in-cluster or kubeconfig)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Callable
from typing import Any, TypeVar

import click

from raycluster_operator.controller.manager import Manager, ManagerOptions
from raycluster_operator.controller.raycluster.registration import ControllerOptions
from raycluster_operator.controller.raycluster.sources import SourceOptions
from raycluster_operator.controller.runtime.logs import configure_logging
from raycluster_operator.controller.runtime.ratelimit import TokenBucket
from raycluster_operator.controller.runtime.serving import ServingOptions, default_identity
from raycluster_operator.kube import KubeClient
from raycluster_operator.planning import PlanOptions
from raycluster_operator.planning.features.backoff import DEFAULT_POLICY
from raycluster_operator.planning.features.disruption import DEFAULT_WINDOW

log = logging.getLogger(__name__)

KNOWN_GATES = {"RayMultiHostIndexing": True}
#: Where Kubernetes mounts the pod's namespace for its service account.
POD_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def split_namespaces(given: tuple[str, ...]) -> tuple[str, ...]:
    """``--namespace a,b`` (KubeRay's ``--watch-namespace`` form) as well as ``--namespace a
    --namespace b``, so one list of namespaces serves both operators' flags."""
    out: list[str] = []
    for value in given:
        out += [ns.strip() for ns in value.split(",") if ns.strip() and ns.strip() not in out]
    return tuple(out)


def pod_namespace(default: str = "default") -> str:
    """The namespace this pod runs in (for the Lease), or ``default`` outside a cluster."""
    if os.path.exists(POD_NAMESPACE_FILE):
        with open(POD_NAMESPACE_FILE) as f:
            return f.read().strip() or default
    return default


def parse_feature_gates(text: str) -> dict[str, bool]:
    """``A=true,B=false`` -> {"A": True, "B": False}, starting from the defaults."""
    gates = dict(KNOWN_GATES)
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or value.lower() not in ("true", "false"):
            raise click.BadParameter(
                f"{item!r}: expected Name=true|false", param_hint="--feature-gates"
            )
        if name not in KNOWN_GATES:
            raise click.BadParameter(f"unknown feature gate {name!r}", param_hint="--feature-gates")
        gates[name] = value.lower() == "true"
    return gates


F = TypeVar("F", bound=Callable[..., Any])


def backoff_options(command: F) -> F:
    """``--slice-backoff-*``: the crash-loop backoff per slice (docs/design.md §4 rule 13a),
    shared by ``run`` and ``dev``."""
    seconds = click.FloatRange(min=0)
    for flag, default, text in reversed(
        (
            (
                "--slice-backoff-base",
                DEFAULT_POLICY.base,
                "First wait before re-creating a slice "
                "that broke again soon after it was recreated (seconds; 0 turns backoff off).",
            ),
            ("--slice-backoff-max", DEFAULT_POLICY.max, "Cap of the doubling wait (seconds)."),
            (
                "--slice-backoff-reset",
                DEFAULT_POLICY.reset,
                "Seconds a slice stays ready before its breaks are forgiven.",
            ),
            (
                "--maintenance-window",
                DEFAULT_WINDOW,
                "Seconds before a node's announced host maintenance "
                "(cloud.google.com/scheduled-maintenance-time) that its slices are moved "
                "(docs/design.md §4 rule 12b).",
            ),
        )
    ):
        command = click.option(flag, default=default, show_default=True, type=seconds, help=text)(
            command
        )
    return command


@click.command(name="run")
@click.option(
    "--kubeconfig", type=click.Path(dir_okay=False), help="Default: in-cluster, then $KUBECONFIG."
)
@click.option("--context", default=None, help="kubeconfig context to use.")
@click.option(
    "--namespace",
    "namespaces",
    multiple=True,
    help="Watch only these: repeatable, or comma-separated as KubeRay's --watch-namespace.",
)
@click.option("--metrics-addr", default=":8080", show_default=True)
@click.option("--health-addr", default=":8082", show_default=True)
@click.option("--leader-elect/--no-leader-elect", default=True, show_default=True)
@click.option("--lease-namespace", default=None, help="Default: the pod's namespace, or default.")
@click.option("--lease-name", default="raycluster-operator-leader", show_default=True)
@click.option("--reconcile-concurrency", default=4, show_default=True, type=click.IntRange(1, 256))
@click.option("--qps", default=100.0, show_default=True, help="Client-side API request rate.")
@click.option("--burst", default=200, show_default=True, type=click.IntRange(1))
@click.option("--feature-gates", default="", help="e.g. RayMultiHostIndexing=true")
@click.option(
    "--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.option(
    "--insecure-skip-tls-verify", is_flag=True, help="Do not verify the server's certificate."
)
@click.option(
    "--resync-period", default=300.0, show_default=True, help="Seconds between full resyncs."
)
@click.option(
    "--unready-slice-timeout",
    default=60.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Seconds a slice host that was Ready may stay unready before its slice is replaced; "
    "a host on a NotReady/Unknown or unreachable/not-ready-tainted node replaces its slice at "
    "once (needs list/watch on nodes). 0 turns host-loss failover off: Kubernetes' "
    "eviction decides.",
)
@backoff_options
def run(
    kubeconfig: str | None,
    context: str | None,
    namespaces: tuple[str, ...],
    metrics_addr: str,
    health_addr: str,
    leader_elect: bool,
    lease_namespace: str | None,
    lease_name: str,
    reconcile_concurrency: int,
    qps: float,
    burst: int,
    feature_gates: str,
    log_format: str,
    insecure_skip_tls_verify: bool,
    resync_period: float,
    unready_slice_timeout: float,
    slice_backoff_base: float,
    slice_backoff_max: float,
    slice_backoff_reset: float,
    maintenance_window: float,
) -> None:
    """Run the operator until SIGINT/SIGTERM."""
    configure_logging(log_format)
    gates = parse_feature_gates(feature_gates)
    options = ManagerOptions(
        sources=SourceOptions(namespaces=split_namespaces(namespaces)),
        controller=ControllerOptions(
            reconcile_concurrency=reconcile_concurrency, resync_period=resync_period
        ),
        serving=ServingOptions(
            metrics_addr=metrics_addr or None,
            health_addr=health_addr or None,
            leader_elect=leader_elect,
            lease_namespace=lease_namespace or pod_namespace(),
            lease_name=lease_name,
            identity=os.environ.get("POD_NAME") or default_identity(),
        ),
        planning=PlanOptions(
            multi_host_indexing=gates["RayMultiHostIndexing"],
            random_pod_delete=os.environ.get("ENABLE_RANDOM_POD_DELETE", "").lower() == "true",
            inject_probes=os.environ.get("ENABLE_PROBES_INJECTION", "").lower() != "false",
            unready_slice_timeout=unready_slice_timeout,
            slice_backoff_base=slice_backoff_base,
            slice_backoff_max=slice_backoff_max,
            slice_backoff_reset=slice_backoff_reset,
            maintenance_window=maintenance_window,
        ),
    )
    try:
        client = KubeClient.from_kubeconfig(
            kubeconfig,
            context=context,
            insecure=insecure_skip_tls_verify,
            throttle=TokenBucket(qps, burst),
        )
    except Exception as exc:  # configuration errors of every kind end here
        raise click.ClickException(f"cannot configure the Kubernetes client: {exc}") from exc
    asyncio.run(_serve(client, options))


async def _serve(client: KubeClient, options: ManagerOptions) -> None:
    manager = Manager(client, options)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, manager.stop)
    log.info("raycluster-operator starting as %s", options.serving.identity)
    try:
        await manager.run()
    finally:
        await client.close()
        log.info("raycluster-operator stopped")
