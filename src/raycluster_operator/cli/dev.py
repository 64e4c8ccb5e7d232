"""`raycluster-operator dev`: the embedded dev cluster in the foreground (the command; what it
runs is `raycluster_operator.devcluster`).

A stale kubeconfig from an earlier run is removed first, and the new one is written only once
everything is up (devcluster/foreground.py), so a script may wait for the file to appear.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import Any

import click
import yaml

from raycluster_operator.cli.run import backoff_options, split_namespaces
from raycluster_operator.devcluster.foreground import (
    AUTO,
    WITH,
    node_spec_help,
    node_spec_problem,
    resolve_runtime,
    runtimes,
    serve,
)
from raycluster_operator.planning import PlanOptions

log = logging.getLogger("raycluster_operator.dev")

DEFAULT_KUBECONFIG = Path(".devcluster") / "kubeconfig"


@click.command(name="dev")
@click.option(
    "--port", type=int, default=0, show_default=True, help="API port; 0 picks a free one."
)
@click.option(
    "--kubeconfig",
    "kubeconfig",
    type=click.Path(dir_okay=False, path_type=Path),
    default=DEFAULT_KUBECONFIG,
    show_default=True,
    help="Where to write the kubeconfig once the cluster is ready.",
)
@click.option("--nodes", "nodes", multiple=True, metavar="SPEC", help=node_spec_help())
@click.option(
    "--apply",
    "apply_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="YAML file (multi-document) to apply after start; namespace defaults to 'default'.",
)
@click.option("--no-operator", is_flag=True, help="Run the cluster without the operator.")
@click.option(
    "--deployed",
    is_flag=True,
    help="Install the operator as production does (what `kubectl apply -k deploy/overlays/dev` "
    "applies: CRD, RBAC, a 2-replica Deployment with leader election) and run it as pods, "
    "in-cluster, instead of in this process. Needs the process runtime.",
)
@click.option(
    "--runtime",
    default=AUTO,
    show_default=True,
    help="Kubelet runtime: 'process' runs pods as real local processes (a RayCluster becomes "
    "a real Ray cluster; needs Linux and root), 'simulated' only pretends; 'auto' takes "
    "'process' where the machine allows it, else 'simulated'.",
)
@click.option(
    "--control-plane",
    "control_plane",
    type=click.Choice(["embedded", "kubernetes"]),
    default="embedded",
    show_default=True,
    help="Who serves the API: the embedded dev server, or Kubernetes' own kube-apiserver, "
    "kube-controller-manager, kube-scheduler and etcd (built once from the Go module proxy "
    "into a cache; the first build takes minutes), with this command's nodes joined to it.",
)
@click.option(
    "--with",
    "with_",
    type=click.Choice(WITH),
    multiple=True,
    help="Run beside the cluster (each built once from the Go module proxy; needs "
    "--control-plane kubernetes): 'kuberay' is KubeRay's own operator, with the CRDs and RBAC "
    "of its kustomize base in place of ours (partition the namespaces with --namespace and "
    "--kuberay-namespace); 'kueue' is Kueue, installed from its release's manifests with its "
    "RayCluster and RayJob integrations on (needs root: it runs in a private mount namespace).",
)
@click.option(
    "--namespace",
    "namespaces",
    multiple=True,
    help="The operator watches only these (as `run --namespace`): repeatable or comma-separated.",
)
@click.option(
    "--kuberay-namespace",
    "kuberay_namespaces",
    multiple=True,
    help="With --with kuberay: KubeRay's --watch-namespace (repeatable or comma-separated; "
    "default every namespace).",
)
@click.option(
    "--kubelet-delay", type=float, default=0.2, show_default=True, help="Seconds to start a pod."
)
@click.option("--watch", is_flag=True, help="Print a live table of pods to stdout.")
@click.option(
    "--unready-slice-timeout",
    default=60.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Passed to the operator (`raycluster-operator run --unready-slice-timeout`).",
)
@click.option("-v", "--verbose", is_flag=True, help="Debug logging.")
@backoff_options
def dev(
    port: int,
    kubeconfig: Path,
    nodes: tuple[str, ...],
    apply_files: tuple[Path, ...],
    no_operator: bool,
    deployed: bool,
    runtime: str,
    control_plane: str,
    with_: tuple[str, ...],
    namespaces: tuple[str, ...],
    kuberay_namespaces: tuple[str, ...],
    kubelet_delay: float,
    watch: bool,
    unready_slice_timeout: float,
    verbose: bool,
    slice_backoff_base: float,
    slice_backoff_max: float,
    slice_backoff_reset: float,
    maintenance_window: float,
) -> None:
    """Run an in-process Kubernetes API server with simulated TPU/GPU nodes (and the operator).

    Where the machine allows it (Linux, root), pods run as real local processes, so a
    RayCluster becomes a real Ray cluster. Stop it with Ctrl-C or SIGTERM. kubectl works
    against the written kubeconfig.
    """
    _configure_logging(verbose)
    problem = node_spec_problem(nodes)
    if problem is not None:
        raise click.BadParameter(problem, param_hint="--nodes")
    if runtime not in runtimes():
        known = ", ".join(runtimes())
        raise click.BadParameter(
            f"unknown runtime {runtime!r} (known: {known})", param_hint="--runtime"
        )
    runtime, why = resolve_runtime(runtime)
    log.info("kubelet runtime: %s (%s)", runtime, why)
    _check_combinations(
        with_, control_plane, deployed, no_operator, runtime, why, kuberay_namespaces
    )
    documents = [doc for path in apply_files for doc in _load_documents(path)]
    kubeconfig.unlink(missing_ok=True)  # a script waiting for it must not see the old one
    try:
        code = asyncio.run(
            serve(
                port=port,
                kubeconfig=kubeconfig,
                nodes=nodes,
                documents=documents,
                operator=not no_operator,
                deployed=deployed,
                runtime=runtime,
                control_plane=control_plane,
                namespaces=split_namespaces(namespaces),
                kuberay=split_namespaces(kuberay_namespaces) if "kuberay" in with_ else None,
                with_=with_,
                kubelet_delay=kubelet_delay,
                watch=watch,
                planning=PlanOptions(
                    # KubeRay's switch, read as `run` reads it (rule 3.4c).
                    inject_probes=os.environ.get("ENABLE_PROBES_INJECTION", "").lower() != "false",
                    unready_slice_timeout=unready_slice_timeout,
                    slice_backoff_base=slice_backoff_base,
                    slice_backoff_max=slice_backoff_max,
                    slice_backoff_reset=slice_backoff_reset,
                    maintenance_window=maintenance_window,
                ),
            )
        )
    finally:
        kubeconfig.unlink(missing_ok=True)
    sys.exit(code)


def _check_combinations(
    with_: tuple[str, ...],
    control_plane: str,
    deployed: bool,
    no_operator: bool,
    runtime: str,
    why: str,
    kuberay_namespaces: tuple[str, ...],
) -> None:
    """Options that do not go together, refused as usage errors before anything starts."""
    if with_ and control_plane != "kubernetes":
        raise click.BadParameter(
            f"{', '.join(with_)} needs a real API server: add --control-plane kubernetes",
            param_hint="--with",
        )
    if deployed and no_operator:
        raise click.BadParameter("--deployed installs the operator", param_hint="--no-operator")
    if deployed and runtime != "process":
        raise click.BadParameter(
            f"--deployed runs the operator's pods as processes: needs the process runtime ({why})",
            param_hint="--deployed",
        )
    if kuberay_namespaces and "kuberay" not in with_:
        raise click.BadParameter("needs --with kuberay", param_hint="--kuberay-namespace")


def _configure_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def _load_documents(path: Path) -> list[dict[str, Any]]:
    try:
        docs = list(yaml.safe_load_all(path.read_text()))
    except yaml.YAMLError as error:
        raise click.BadParameter(f"{path}: {error}", param_hint="--apply") from None
    for doc in docs:
        if doc is not None and not isinstance(doc, dict):
            raise click.BadParameter(f"{path}: a document is not a mapping", param_hint="--apply")
    return [doc for doc in docs if doc]
