"""Real Ray on the dev cluster: the process runtime, the operator attached, a driver in a pod.

Every pod is real local processes (devcluster.process), so a RayCluster here is a real Ray
cluster: `ray start` in each pod, the real `ray kuberay-autoscaler` sidecar when autoscaling is
on. Drivers run inside the head pod (as `kubectl exec` would), because a Ray driver must sit on
a Ray node: it finds its raylet through the process table and the node's /tmp/ray.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import pytest
import pytest_asyncio

from devkube.process.pod import ProcessPod
from devkube.process.runtime import ProcessRuntime
from raycluster_operator.controller.manager import Manager

from . import manifests as m
from . import waiting
from .objects import Obj
from .pods import labels as labels_of
from .pods import of_type
from .world import DevWorld

__all__ = ["labels_of"]

#: One head on a CPU node, two pools of one 2-host TPU v5p 2x2x2 slice each (4 chips a host).
NODES = ["tpu:v5p:2x2x2:2", "cpu:1"]
TPU_SELECTOR = m.V5P_2X2X2
#: Ray's object store defaults to ~30% of the machine per node; tests need little.
SMALL = {"object-store-memory": "100000000", "num-cpus": "1"}
#: What Ray runs that these tests never read, off in one place (issue #23: the real-Ray files
#: were the suite's largest CPU users and its tail; a Ray node is a handful of Python processes,
#: each a second of CPU or more to start). The log monitor only streams workers' prints to
#: drivers: the tests read a driver's own output and Ray's log files, as make run's example
#: does ...
LIGHT = {**SMALL, "include-log-monitor": "false"}
#: ... and a head whose test neither submits jobs nor reads the dashboard runs Ray's dashboard
#: process with its usage-stats module only (`--include-dashboard=false`), not its nine module
#: processes. The README's tests (quickstart, RayJob) keep the dashboard they use.
NO_DASHBOARD = {"include-dashboard": "false"}
LIGHT_HEAD = {**LIGHT, **NO_DASHBOARD}
#: The machine's environment in every pod of a real-Ray world, as a node image would set it:
#: no usage-stats reporting, no metrics recorded by Ray's core (raylet, GCS, workers), and the
#: dashboard agent's node report (psutil over every worker, first sent at start) once a minute
#: instead of every 5 s. No test reads Ray's metrics; on the JaxTrainer's many workers these
#: were most of the agents' CPU. Token authentication stays off even where the machine has a
#: ~/.ray/auth_token (a local `ray.init()` of Ray 2.60 writes one, and every `ray start --head`
#: would then demand it from drivers that do not send it).
LIGHT_ENV = {
    "RAY_AUTH_MODE": "disabled",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_enable_metrics_collection": "0",
    "REPORTER_UPDATE_INTERVAL_MS": "60000",
}
RESULT_MARK = "E2E-RESULT "
#: A driver that asks for one whole v5p 2x2x2 slice (two bundles of 4 TPU chips on distinct
#: hosts), waits for it, and prints the placed nodes' ids and labels: the autoscaler tests'.
SLICE_DEMAND = f"""
from ray.util.placement_group import placement_group, placement_group_table
ray.init(address="auto", logging_level="ERROR")
pg = placement_group([{{"TPU": 4}}, {{"TPU": 4}}], strategy="STRICT_SPREAD")
ray.get(pg.ready(), timeout=300)
placed = set(placement_group_table(pg)["bundles_to_node_id"].values())
print("{RESULT_MARK}" + json.dumps([
    {{"id": n["NodeID"], "labels": n.get("Labels", {{}})}}
    for n in ray.nodes() if n["Alive"] and n["NodeID"] in placed
]))
"""

#: `ray start` on a shared 2-core machine (make test's 4 workers) takes seconds to minutes, so a
#: wait on it has no fixed limit: it fails once nothing of the cluster moved for this long (no
#: pod, phase, container state or log changed, Ray's own session logs included) ...
RAY_STALL_S = 300.0
#: ... or after this long in all, below the hang guard of the modules that start Ray
#: (`REAL_RAY_GUARD`), so the failure comes with the logs and not as a bare timeout.
RAY_BOUND_S = 1500.0
#: pytest-timeout's hang guard for a module of real Ray (a guard, not a limit tests assert on).
REAL_RAY_GUARD = 2400
#: A real-Ray module's marks: its tests share the module's world and event loop.
REAL_RAY_MODULE = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(REAL_RAY_GUARD)]
T = TypeVar("T")


def raycluster(
    name: str,
    *,
    replicas: int = 1,
    autoscaling: bool = False,
    idle_timeout: int = 10,
    min_replicas: int = 0,
    dashboard: bool = False,
) -> Obj:
    """One head and one TPU group of 2-host slices (restartPolicy Never on workers: a host
    whose Ray exits fails, so its slice is replaced whole, as under autoscaler v2); Ray as
    light as the tests allow (`LIGHT`), the head's dashboard only when ``dashboard``."""
    head = m.container(
        "ray-head",
        ports=[{"name": "gcs-server", "containerPort": 6379}],
        limits={"cpu": "1", "memory": "2Gi"},
    )
    worker = m.container("ray-worker", limits={"cpu": "1", "memory": "1Gi", "google.com/tpu": "4"})
    pod = m.template(worker, restartPolicy="Never", nodeSelector=dict(TPU_SELECTOR))
    group = m.worker_group(
        "tpu",
        pod,
        replicas=replicas,
        min_replicas=min_replicas,
        max_replicas=2,
        hosts=2,
        params=LIGHT,
    )
    spec: Obj = {}
    if autoscaling:
        spec["enableInTreeAutoscaling"] = True
        spec["autoscalerOptions"] = {
            "version": "v2",
            "idleTimeoutSeconds": idle_timeout,
            "upscalingMode": "Default",
            "resources": {"limits": {"cpu": "500m", "memory": "512Mi"}},
        }
    head_params = LIGHT if dashboard else LIGHT_HEAD
    return m.raycluster(name, m.head_group(head, head_params), [group], **spec)


async def eventually(check: Callable[[], Any], within: float) -> Any:
    """Real Ray is slow to change: poll it gently."""
    return await waiting.eventually(check, within, interval=0.25)


@dataclass
class RayWorld(DevWorld):
    """The process runtime (real Ray in every pod) with one operator attached."""

    logs: list[str] = field(default_factory=list)

    operator_defaults: ClassVar[dict[str, Any]] = dict(
        resync_period=30.0, retry_base_delay=0.05, retry_max_delay=2.0, identity="e2e-operator"
    )
    sync_within: ClassVar[float] = 30.0
    sync_interval: ClassVar[float] = 0.25
    drain_may_hang: ClassVar[bool] = True
    stop_patience: ClassVar[float] = 30.0

    @property
    def manager(self) -> Manager:
        return self.operators[0].manager

    @property
    def operator(self) -> Any:
        return self.operators[0].task

    @property
    def runtime(self) -> ProcessRuntime:
        runtime = self.cluster.kubelet.runtime
        assert isinstance(runtime, ProcessRuntime)
        return runtime

    async def head(self, cluster: str) -> Obj:
        heads = of_type(await self.pods(cluster), "head")
        assert len(heads) == 1, heads
        return heads[0]

    async def workers(self, cluster: str) -> list[Obj]:
        return of_type(await self.pods(cluster), "worker")

    def process_pod(self, name: str) -> ProcessPod:
        found = self.runtime.find("default", name)
        assert found is not None, f"pod {name} runs no processes here"
        return found

    def log_of(self, name: str, container: str | None = None) -> str:
        return (self.runtime.read_log("default", name, container) or b"").decode(errors="replace")

    def ray_started(self, name: str) -> bool:
        return "Ray runtime started" in self.log_of(name)

    async def ray_up(self, cluster: str, workers: int = 0, **wait: float) -> str:
        """The head pod's name once the head and exactly ``workers`` worker pods of ``cluster``
        run and every one has started Ray; waits while the cluster makes progress
        (``while_progressing``, whose ``stall`` and ``bound`` ``wait`` may set)."""

        async def up() -> str:
            pods = await self.pods(cluster)
            names = [p["metadata"]["name"] for p in pods]
            heads = of_type(pods, "head")
            assert len(heads) == 1 and len(of_type(pods, "worker")) == workers, names
            waiting = [n for n in names if not self.ray_started(n)]
            assert not waiting, f"Ray has not started in {waiting}"
            return str(heads[0]["metadata"]["name"])

        return await self.while_progressing(cluster, up, **wait)

    async def while_progressing(
        self,
        cluster: str,
        check: Callable[[], Awaitable[T]],
        *,
        stall: float = RAY_STALL_S,
        bound: float = RAY_BOUND_S,
    ) -> T:
        """Retry ``check`` (AssertionError: not yet) as long as ``cluster`` shows progress;
        when it gives up, the error carries every pod's logs and Ray's, so a failure under
        load says whether Ray was slow or failed to start."""
        loop = asyncio.get_running_loop()
        began = moved = loop.time()
        seen: object = None
        while True:
            try:
                return await check()
            except AssertionError as error:
                now, state = loop.time(), await self._progress(cluster)
                if state != seen:
                    seen, moved = state, now
                restarted = await self._head_restarted(cluster)
                if restarted or now - moved > stall or now - began > bound:
                    waited = f"{now - began:.0f} s, the last {now - moved:.0f} s without progress"
                    waited += "; the head's Ray container restarted" if restarted else ""
                    report = await self.ray_report(cluster)
                    raise AssertionError(f"{error}\n(waited {waited})\n{report}") from error
            await asyncio.sleep(0.5)

    async def _head_restarted(self, cluster: str) -> bool:
        """A restart of the head's Ray container is a failed start, not progress: its crash
        loop would otherwise look like progress until the bound (the log keeps every
        attempt)."""
        for pod in of_type(await self.pods(cluster), "head"):
            ray = pod["spec"]["containers"][0]["name"]  # the autoscaler sidecar may restart
            for status in (pod.get("status") or {}).get("containerStatuses") or []:
                if status.get("name") == ray and status.get("restartCount", 0) > 0:
                    return True
        return False

    def _ray_logs(self, name: str) -> list[Path]:
        """Ray's session logs in the pod's /tmp (GCS, raylet, dashboard, ...), if any."""
        found = self.runtime.find("default", name)
        if found is None:
            return []
        logs = found.sandbox.files.tmp / "ray" / "session_latest" / "logs"
        with contextlib.suppress(OSError):
            return sorted(p for p in logs.iterdir() if p.is_file())
        return []

    async def _progress(self, cluster: str) -> object:
        state = []
        for pod in await self.pods(cluster, live=False):
            name = pod["metadata"]["name"]
            status = pod.get("status") or {}
            found = self.runtime.find("default", name)
            logs = [len(found.read_log(c)) for c in found.runners] if found else []
            ray = [(p.name, _size(p)) for p in self._ray_logs(name)]
            statuses = json.dumps(status.get("containerStatuses"), sort_keys=True)
            state.append((name, status.get("phase"), statuses, logs, ray))
        return state

    async def ray_report(self, cluster: str, tail: int = 3000) -> str:
        """Every pod of ``cluster``: its phase, each container's log, and the tails of Ray's
        error logs and of its GCS and raylet logs."""
        out = []
        for pod in await self.pods(cluster, live=False):
            name = pod["metadata"]["name"]
            status = pod.get("status") or {}
            out.append(f"===== pod {name}: {status.get('phase')} {status.get('conditions')}")
            found = self.runtime.find("default", name)
            for container in found.runners if found else []:
                out.append(f"----- {container} log:\n{self.log_of(name, container)[-tail:]}")
            for path in self._ray_logs(name):
                wanted = path.suffix == ".err" or path.name in ("gcs_server.out", "raylet.out")
                text = ""
                with contextlib.suppress(OSError):  # Ray may rotate or remove it meanwhile
                    text = path.read_bytes()[-tail:].decode(errors="replace") if wanted else ""
                if text.strip():
                    out.append(f"----- {name}: /tmp/ray/session_latest/logs/{path.name}:\n{text}")
        return "\n".join(out)

    async def driver(self, head_pod: str, code: str, *, seconds: float = 240) -> Any:
        """Run a Python driver in the head pod with the Ray container's environment; it prints
        one line `E2E-RESULT <json>`, which is returned."""
        pod = self.process_pod(head_pod)
        env = dict(pod.runners["ray-head"].launch.env)
        script = "import json, ray\n" + code
        code_, out = await pod.sandbox.exec(["python", "-c", script], env, "/", seconds)
        text = out.decode(errors="replace")
        self.logs.append(text)
        for line in reversed(text.splitlines()):
            if line.startswith(RESULT_MARK):
                return json.loads(line[len(RESULT_MARK) :])
        raise AssertionError(f"driver exited {code_} without a result:\n{text[-4000:]}")

    def kill_process(self, pod_name: str, program: str) -> int:
        """SIGKILL the pod's process whose command line names `program` (e.g. raylet)."""
        for pid in self.process_pod(pod_name).sandbox.pids():
            with contextlib.suppress(OSError):
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                if argv and os.path.basename(argv[0].decode()) == program:
                    os.kill(pid, signal.SIGKILL)
                    return pid
        raise AssertionError(f"no {program} process in pod {pod_name}")


async def start_world(nodes: list[str] | None = None, **cluster_options: Any) -> RayWorld:
    """``cluster_options`` are DevCluster's (``addons=...``). Every pod gets `LIGHT_ENV` over
    the machine's environment (the runtime's base environment, set before any pod starts), so
    clusters applied as written (make run's example) get it too."""
    world = await RayWorld.start(nodes or NODES, runtime="process", **cluster_options)
    settings = world.runtime.settings
    world.runtime.settings = dataclasses.replace(
        settings, base_env={**settings.base_env, **LIGHT_ENV}
    )
    try:
        # The operator acts as its ServiceAccount with deploy/'s RBAC, as in production.
        await world.start_operator()
    except BaseException:
        await world.close()
        raise
    return world


async def stop_world(world: RayWorld) -> None:
    await world.close()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:  # Ray may rotate or remove a log between listing and reading
        return -1


def module_world(
    nodes: list[str] | None = None, *, applied: tuple[Obj, ...] = (), **cluster_options: Any
) -> Any:
    """A module's ``world`` fixture: one dev cluster of real Ray with the operator, shared by
    the module's tests (``applied``: manifests applied before the first test)."""

    @pytest_asyncio.fixture(loop_scope="module", scope="module")
    async def world() -> AsyncIterator[RayWorld]:
        w = await start_world(nodes, **cluster_options)
        try:
            for manifest in applied:
                await w.cluster.apply(manifest)
            yield w
        finally:
            await stop_world(w)

    return world
