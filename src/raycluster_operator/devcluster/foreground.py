"""`raycluster-operator dev`'s dev cluster in the foreground, until SIGINT or SIGTERM.

Order matters to scripts: the kubeconfig is written only once the cluster is up, the CRD is
installed, every document is applied and the operator is attached (or deployed), so "wait
until the kubeconfig file exists" is a complete readiness check.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from raycluster_operator.api.objects import Resource
from raycluster_operator.devcluster.attach import (
    DEFAULT_PLANNING,
    hint,
    install_crd,
    operator_attached,
    operator_deployed,
)
from raycluster_operator.devcluster.watch import watch_pods
from raycluster_operator.planning import PlanOptions

log = logging.getLogger("raycluster_operator.dev")

AUTO = "auto"
#: What `dev --with` can run beside the cluster.
WITH = ("kuberay", "kueue")


async def _start_kueue(cluster: Any, beside: contextlib.AsyncExitStack) -> None:
    """Kueue, after the CRDs (its RayCluster and RayJob integrations start only for kinds
    the API serves), stopped before the cluster."""
    from devkube import Kueue

    kueue = Kueue()
    beside.push_async_callback(kueue.stop)
    log.info("starting kueue (built once from the Go module proxy; the first build takes minutes)")
    await kueue.start(cluster)
    log.info("kueue running; its log: %s", kueue.log_path)


def node_spec_help() -> str:
    """The dev cluster's node-spec grammar, for `--nodes`' help."""
    from devkube import SPEC_HELP

    return SPEC_HELP


def node_spec_problem(nodes: Sequence[str]) -> str | None:
    """Why ``nodes`` is not a valid node list, or None."""
    from devkube import NodeSpecError, parse_spec

    try:
        parse_spec(nodes)
    except NodeSpecError as error:
        return str(error)
    return None


def runtimes() -> tuple[str, ...]:
    """The kubelet runtimes a dev cluster knows, `auto` first."""
    from devkube import RUNTIMES

    return (AUTO, *RUNTIMES)


def resolve_runtime(requested: str) -> tuple[str, str]:
    """The runtime to use and why: `auto` is the process runtime where this machine can run
    pods as processes (Linux, root, unshare), else the simulated one."""
    if requested != AUTO:
        return requested, "as asked"
    from devkube import process_runtime_available

    ok, why = process_runtime_available()
    if ok:
        return "process", "pods run as real local processes; a RayCluster is a real Ray cluster"
    return "simulated", f"pods are simulated, no Ray runs: {why}"


async def serve(
    *,
    port: int,
    kubeconfig: Path,
    nodes: Sequence[str],
    documents: Sequence[Mapping[str, Any]],
    operator: bool,
    runtime: str,
    kubelet_delay: float,
    watch: bool,
    deployed: bool = False,
    planning: PlanOptions = DEFAULT_PLANNING,
    control_plane: str = "embedded",
    namespaces: Sequence[str] = (),
    kuberay: Sequence[str] | None = None,
    with_: Sequence[str] = (),
) -> int:
    """Runs the dev cluster until a signal; the exit code (1: it failed, said in the log).

    ``kuberay``: KubeRay's operator runs too, watching those namespaces (all when empty); its
    kustomize base's CRDs are installed instead of ours (docs/design.md §3.7: ours runs under
    either), so the CEL rules and pruning are KubeRay's own. ``with_`` names what else runs
    beside it once the CRDs are served ("kueue": Kueue, queueing RayClusters and RayJobs;
    Kubernetes' control plane only)."""
    from devkube import DevCluster, addons_for

    addons = addons_for(list(nodes))
    if kuberay is not None:
        from devkube import KubeRayOperator

        addons.append(KubeRayOperator(kuberay))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with (
            DevCluster(
                port=port,
                nodes=list(nodes),
                runtime=runtime,
                kubelet_delay=kubelet_delay,
                control_plane=control_plane,
                # NVIDIA's DRA driver (simulated) when the nodes hold GB200/GB300 NVLink domains.
                addons=addons,
            ) as cluster,
            contextlib.AsyncExitStack() as beside,
        ):
            if kuberay is None:
                await install_crd(cluster)
            if "kueue" in with_:
                await _start_kueue(cluster, beside)
            for doc in documents:
                applied = Resource(await cluster.apply(doc))
                log.info("applied %s %s", applied.kind, applied.name)
            attach = operator_deployed if deployed else operator_attached
            async with attach(
                cluster, enabled=operator, planning=planning, namespaces=tuple(namespaces)
            ):
                path = cluster.write_kubeconfig(kubeconfig)
                log.info("dev cluster ready at %s", cluster.url)
                hint(f"export KUBECONFIG={path.resolve()}")
                # The coroutine is made only when it runs: one never awaited is a warning
                # at exit.
                table = (
                    asyncio.create_task(watch_pods(cluster, str(path.resolve()))) if watch else None
                )
                await stop.wait()
                if table is not None:
                    table.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await table
            log.info("stopping")
    except Exception as error:
        log.error("dev cluster failed: %s", error)
        return 1
    return 0
