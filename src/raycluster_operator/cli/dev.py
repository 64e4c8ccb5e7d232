"""`raycluster-operator dev`: the embedded dev cluster in the foreground.

Order matters to scripts: the kubeconfig is written only once the cluster is up, the CRD is
installed and every --apply file is in, so "wait until the kubeconfig file exists" is a
complete readiness check. A stale kubeconfig from an earlier run is removed first.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import signal
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import yaml

from raycluster_operator.api.objects import Pod, Resource
from raycluster_operator.cli.run import backoff_options
from raycluster_operator.planning import PlanOptions

#: Planning options of an operator started without flags (PlanOptions is frozen).
DEFAULT_PLANNING = PlanOptions()

if TYPE_CHECKING:
    from devkube import DevCluster

log = logging.getLogger("raycluster_operator.dev")

DEFAULT_KUBECONFIG = Path(".devcluster") / "kubeconfig"
AUTO = "auto"
#: What `ray start` prints once the node is up (head and workers alike).
RAY_STARTED = b"Ray runtime started"
TABLE_LABELS = (
    ("GROUP", "ray.io/group"),
    ("REPLICA", "ray.io/worker-group-replica-index"),
    ("HOST", "ray.io/replica-host-index"),
)


def _nodes_help() -> str:
    from devkube import SPEC_HELP

    return SPEC_HELP


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
@click.option("--nodes", "nodes", multiple=True, metavar="SPEC", help=_nodes_help())
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
    default="auto",
    show_default=True,
    help="Kubelet runtime: 'process' runs pods as real local processes (a RayCluster becomes "
    "a real Ray cluster; needs Linux and root), 'simulated' only pretends; 'auto' takes "
    "'process' where the machine allows it, else 'simulated'.",
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
    kubelet_delay: float,
    watch: bool,
    unready_slice_timeout: float,
    verbose: bool,
    slice_backoff_base: float,
    slice_backoff_max: float,
    slice_backoff_reset: float,
) -> None:
    """Run an in-process Kubernetes API server with simulated TPU/GPU nodes (and the operator).

    Where the machine allows it (Linux, root), pods run as real local processes, so a
    RayCluster becomes a real Ray cluster. Stop it with Ctrl-C or SIGTERM. kubectl works
    against the written kubeconfig.
    """
    from devkube import RUNTIMES, NodeSpecError, parse_spec

    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    try:
        parse_spec(nodes)
    except NodeSpecError as error:
        raise click.BadParameter(str(error), param_hint="--nodes") from None
    if runtime != AUTO and runtime not in RUNTIMES:
        known = ", ".join([AUTO, *RUNTIMES])
        raise click.BadParameter(
            f"unknown runtime {runtime!r} (known: {known})", param_hint="--runtime"
        )
    runtime, why = resolve_runtime(runtime)
    log.info("kubelet runtime: %s (%s)", runtime, why)
    if deployed and no_operator:
        raise click.BadParameter("--deployed installs the operator", param_hint="--no-operator")
    if deployed and runtime != "process":
        raise click.BadParameter(
            f"--deployed runs the operator's pods as processes: needs the process runtime ({why})",
            param_hint="--deployed",
        )
    documents = [doc for path in apply_files for doc in _load_documents(path)]
    kubeconfig.unlink(missing_ok=True)  # a script waiting for it must not see the old one
    try:
        code = asyncio.run(
            _serve(
                port=port,
                kubeconfig=kubeconfig,
                nodes=nodes,
                documents=documents,
                operator=not no_operator,
                deployed=deployed,
                runtime=runtime,
                kubelet_delay=kubelet_delay,
                watch=watch,
                planning=PlanOptions(
                    unready_slice_timeout=unready_slice_timeout,
                    slice_backoff_base=slice_backoff_base,
                    slice_backoff_max=slice_backoff_max,
                    slice_backoff_reset=slice_backoff_reset,
                ),
            )
        )
    finally:
        kubeconfig.unlink(missing_ok=True)
    sys.exit(code)


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


def _load_documents(path: Path) -> list[dict[str, Any]]:
    try:
        docs = list(yaml.safe_load_all(path.read_text()))
    except yaml.YAMLError as error:
        raise click.BadParameter(f"{path}: {error}", param_hint="--apply") from None
    for doc in docs:
        if doc is not None and not isinstance(doc, dict):
            raise click.BadParameter(f"{path}: a document is not a mapping", param_hint="--apply")
    return [doc for doc in docs if doc]


async def _serve(
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
) -> int:
    from devkube import DevCluster

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with DevCluster(
            port=port, nodes=list(nodes), runtime=runtime, kubelet_delay=kubelet_delay
        ) as cluster:
            await _install_crd(cluster)
            for doc in documents:
                applied = Resource(await cluster.apply(doc))
                log.info("applied %s %s", applied.kind, applied.name)
            attach = _operator_deployed if deployed else _operator_attached
            async with attach(cluster, enabled=operator, planning=planning):
                path = cluster.write_kubeconfig(kubeconfig)
                log.info("dev cluster ready at %s", cluster.url)
                click.echo(f"export KUBECONFIG={path.resolve()}", err=True)
                view = _watch_pods(cluster, str(path.resolve()))
                table = asyncio.create_task(view) if watch else None
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


async def _install_crd(cluster: DevCluster) -> None:
    try:
        module = importlib.import_module("raycluster_operator.api.crd")
    except ImportError:
        log.warning("RayCluster CRD not available in this build; not installing it")
        return
    crd = module.crd_manifest()
    await cluster.apply(crd)
    log.info("installed CRD %s", crd.get("metadata", {}).get("name"))
    from raycluster_operator.api.rayjob_crd import rayjob_crd_manifest

    await cluster.apply(rayjob_crd_manifest())
    log.info("installed CRD rayjobs.ray.io")


async def operator_kubeconfig(cluster: DevCluster) -> dict[str, Any]:
    """Install the operator's ServiceAccount and RBAC exactly as `manifests all` ships them
    (deploy/base/rbac.yaml: the ServiceAccount, ClusterRole and binding, and the leader-election
    Role, in namespace raycluster-operator) and return a kubeconfig that acts as that
    ServiceAccount, with a token from the TokenRequest API. The operator then holds in the
    dev cluster exactly the permissions it holds in production: a missing grant fails here."""
    from raycluster_operator.controller import install

    namespace = install.NAME
    await cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    await cluster.install([install.service_account(namespace), *install.cluster_rbac(namespace)])
    return await cluster.service_account_kubeconfig(namespace, install.NAME)


def jobs_api_via(cluster: DevCluster) -> str:
    """How an operator on this host reaches a head's Jobs API: no cluster DNS here, so the
    head pod's IP when pods really run (the process runtime), else the service name."""
    runtime = getattr(cluster.kubelet, "runtime", None)
    return "head-pod-ip" if type(runtime).__name__ == "ProcessRuntime" else "service"


@contextlib.asynccontextmanager
async def _operator_attached(
    cluster: DevCluster, *, enabled: bool, planning: PlanOptions = DEFAULT_PLANNING
) -> AsyncIterator[None]:
    """OPERATOR HOOK: the operator runs in this process as a task, but reaches the cluster
    only over HTTPS with its own ServiceAccount's kubeconfig (`operator_kubeconfig`), exactly
    as a deployed operator does; it is stopped (drained) when the block exits."""
    if not enabled:
        yield
        return
    from raycluster_operator.controller.controller import ControllerOptions
    from raycluster_operator.controller.manager import Manager, ManagerOptions
    from raycluster_operator.controller.rayjobs import RayJobOptions
    from raycluster_operator.controller.serving import ServingOptions
    from raycluster_operator.kube import KubeClient

    logging.getLogger("httpx2").setLevel(logging.WARNING)
    client = KubeClient.from_kubeconfig(await operator_kubeconfig(cluster))
    manager = Manager(
        client,
        ManagerOptions(
            serving=ServingOptions(
                metrics_addr="127.0.0.1:0",
                health_addr="127.0.0.1:0",
                leader_elect=False,
                identity="dev-operator",
            ),
            controller=ControllerOptions(resync_period=60.0),
            planning=planning,
            # On the host, the operator reaches a head's Jobs API at the head pod's IP.
            rayjobs=RayJobOptions(jobs_api_via=jobs_api_via(cluster)),
        ),
    )
    task = asyncio.create_task(manager.run(), name="operator")
    try:
        await asyncio.wait_for(_synced(manager, task), 30)
        metrics = manager.metrics_server.port if manager.metrics_server else 0
        log.info(
            "operator attached as ServiceAccount raycluster-operator/raycluster-operator with "
            "deploy/base/rbac.yaml's grants (metrics on http://127.0.0.1:%d/metrics)",
            metrics,
        )
        click.echo(
            "try: kubectl get rayclusters,pods -L ray.io/group,"
            "ray.io/worker-group-replica-index,ray.io/replica-host-index",
            err=True,
        )
        yield
    finally:
        manager.stop()
        with contextlib.suppress(asyncio.CancelledError, asyncio.TimeoutError):
            await asyncio.wait_for(task, 15)
        await client.close()


#: What `kubectl apply -k deploy/overlays/dev` applies (tests/test_install_kustomize.py holds
#: the two together): the cluster-wide install, its pods running this checkout's operator.
DEV_COMMAND = ["raycluster-operator"]
DEV_ARGS = [
    "run",
    "--leader-elect",
    "--log-format=text",
    "--health-addr=$(POD_IP):8082",
    "--metrics-addr=$(POD_IP):8080",
]
DEV_READINESS_PERIOD = 2
#: `run --unready-slice-timeout`'s default (the dev overlay leaves it out).
DEFAULT_UNREADY_SLICE_TIMEOUT = 60.0


def deployed_manifests(unready_slice_timeout: float = 60.0) -> list[dict[str, Any]]:
    """The dev overlay's objects. The process runtime ignores images and puts the dev
    cluster's own bin directory first on PATH, so the pods run this installation; all pods
    share one network namespace there, so the servers bind the pod IP rather than every
    address (two replicas on :8082 would collide)."""
    from raycluster_operator.api.crd import crd_manifest
    from raycluster_operator.api.rayjob_crd import rayjob_crd_manifest
    from raycluster_operator.controller.install import operator_manifests

    objects = [crd_manifest(), rayjob_crd_manifest(), *operator_manifests()]
    for obj in objects:
        if obj["kind"] == "Deployment":
            container = obj["spec"]["template"]["spec"]["containers"][0]
            container["command"] = list(DEV_COMMAND)
            container["args"] = list(DEV_ARGS)
            if unready_slice_timeout != DEFAULT_UNREADY_SLICE_TIMEOUT:
                container["args"].append(f"--unready-slice-timeout={unready_slice_timeout:g}")
            container["env"] = [
                *container.get("env", []),
                {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            ]
            container["readinessProbe"] = {
                **container["readinessProbe"],
                "periodSeconds": DEV_READINESS_PERIOD,
            }
    return objects


@contextlib.asynccontextmanager
async def _operator_deployed(
    cluster: DevCluster, *, enabled: bool, planning: PlanOptions = DEFAULT_PLANNING
) -> AsyncIterator[None]:
    """The operator as a Deployment in the cluster: ready once the rollout is complete (both
    replicas Ready: caches synced), as `kubectl rollout status` sees it. Its pods go with the
    cluster. (Of ``planning`` only the unready-slice timeout reaches the Deployment's flags.)"""
    deployment = None
    for obj in deployed_manifests(planning.unready_slice_timeout):
        await cluster.apply(obj)
        if obj["kind"] == "Deployment":
            deployment = obj
    assert deployment is not None
    meta = deployment["metadata"]
    path = f"/apis/apps/v1/namespaces/{meta['namespace']}/deployments/{meta['name']}"
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 180
    while True:
        current = await cluster.client.get(path)
        status = current.get("status") or {}
        wanted = current["spec"].get("replicas", 1)
        if (
            status.get("observedGeneration", 0) >= current["metadata"].get("generation", 1)
            and status.get("updatedReplicas") == wanted
            and status.get("availableReplicas") == wanted
        ):
            break
        if loop.time() > deadline:
            raise RuntimeError(f"the operator Deployment did not become available: {status}")
        await asyncio.sleep(0.5)
    log.info("operator deployed: %d replicas in namespace %s", wanted, meta["namespace"])
    click.echo(
        f"try: kubectl get deploy,pods -n {meta['namespace']}; "
        f"kubectl get lease -n {meta['namespace']}",
        err=True,
    )
    yield


async def _synced(manager: Any, task: asyncio.Task[None]) -> None:
    while not manager.synced():
        if task.done():
            task.result()  # the operator failed to start: say why
            raise RuntimeError("the operator stopped before its caches synced")
        await asyncio.sleep(0.05)


def _ready(pod: Pod) -> str:
    ready = sum(1 for s in pod.container_statuses if s.get("ready"))
    return f"{ready}/{len(pod.containers)}"


def _index(value: str) -> tuple[int, int | str]:
    """Numeric labels sort as numbers (10 after 9); absent ones sort last."""
    if value.isdigit():
        return (0, int(value))
    return (1, value)


def ray_state(log: bytes | None, phase: str) -> str:
    """The RAY column: whether the pod's `ray start` is up, from its first container's output
    (None: the pod runs nowhere here, so there is nothing to tell)."""
    if log is None or phase not in ("Pending", "Running"):
        return ""
    return "up" if RAY_STARTED in log else "starting"


def pod_table(
    pods: Iterable[Mapping[str, Any]],
    ray: Callable[[Mapping[str, Any], str], str] | None = None,
) -> str:
    """The --watch table: one row per pod, ordered as slices (group, replica, host).

    The dev cluster itself knows no Ray; the table shows the labels the operator sets, so the
    hosts of one slice stand together and a replaced slice is seen coming back at its index.
    With ``ray`` (pod, phase -> text) a RAY column tells whether each pod's Ray node is up.
    """
    header: tuple[str, ...] = ("NAMESPACE", *(t for t, _ in TABLE_LABELS), "POD", "NODE")
    header += ("PHASE", "READY") + (("RAY",) if ray else ())
    keyed: list[tuple[tuple[Any, ...], tuple[str, ...]]] = []
    for body in pods:
        pod = Pod(body)
        phase = "Terminating" if pod.deleting else pod.phase or "Pending"
        group, replica, host = (str(pod.labels.get(key, "")) for _, key in TABLE_LABELS)
        namespace, name = pod.namespace or "", pod.name
        row = (
            namespace,
            group,
            replica,
            host,
            name,
            pod.node_name or "<none>",
            phase,
            _ready(pod),
            *((ray(body, phase),) if ray else ()),
        )
        keyed.append(((namespace, group, _index(replica), _index(host), name), row))
    rows = [header, *(row for _, row in sorted(keyed))]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def _ray_column(cluster: DevCluster) -> Callable[[Mapping[str, Any], str], str] | None:
    """A RAY column when pods really run here (a runtime that keeps their output)."""
    read_log = getattr(cluster.kubelet.runtime, "read_log", None)
    if read_log is None:
        return None

    def column(body: Mapping[str, Any], phase: str) -> str:
        pod = Pod(body)
        if pod.labels.get("ray.io/is-ray-node") != "yes":
            return ""
        log = read_log(pod.namespace or "default", pod.name)
        state = ray_state(log, phase)
        ip = pod.pod_ip
        # The pod's Ray node: every node announces its pod IP (--node-ip-address).
        return f"node at {ip}" if state == "up" and ip else state

    return column


async def _watch_pods(cluster: DevCluster, kubeconfig: str) -> None:
    """The live view (cli/live_view.py): redrawn in place on a terminal, appended otherwise."""
    from rich.console import Console
    from rich.live import Live

    from raycluster_operator.cli import live_view

    pods: dict[tuple[str, str], dict[str, Any]] = {}
    ray = _ray_column(cluster)
    shown: list[live_view.HostRow] | None = None
    events = cluster.client.list_and_watch("/api/v1/pods")
    changed = asyncio.Event()
    tty = sys.stdout.isatty()
    console = Console() if tty else Console(width=200, no_color=True)
    live = Live(console=console, auto_refresh=False, screen=False) if tty else None

    async def follow() -> None:
        async for event in events:
            if event.type == "SYNC":
                pods.clear()
                items = event.object.get("items") or []
            else:
                items = [event.object]
            for pod in items:
                view = Resource(pod)
                key = (str(view.namespace), view.name)
                if event.type == "DELETED":
                    pods.pop(key, None)
                else:
                    pods[key] = pod
            changed.set()

    follower = asyncio.create_task(follow())
    if live is not None:
        live.start()
    try:
        while True:
            # Ray comes up without any pod changing: with a RAY column, look again each second.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), 1.0 if ray else None)
            await asyncio.sleep(0.2)  # one table per burst of changes
            changed.clear()
            rows = live_view.host_rows(pods.values(), ray)
            if rows == shown:
                continue
            shown = rows
            footer = live_view.next_commands(kubeconfig, rows, real=ray is not None)
            view = live_view.render(rows, footer, ray=ray is not None)
            if live is not None:
                live.update(view, refresh=True)
            else:
                console.print(view)
                console.print()
                sys.stdout.flush()
    finally:
        if live is not None:
            live.stop()
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower
