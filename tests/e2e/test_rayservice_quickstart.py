"""The README's "RayService quickstart", run as written on the process runtime, on real Ray
Serve, with a steady stream of requests counting what fails (issue #35):

1. the RayService of examples/rayservice-tpu-v5p-2x2x2-local.yaml becomes Ready, `kubectl
   port-forward svc/slice-hosts-serve-svc 8000` and curl get answers from both hosts of the
   TPU slice;
2. the README's second block changes the application's code in serveConfigV2 during a stream
   through a port-forward of the serve service: the change rolls in place on the same
   RayCluster and no request fails;
3. (benchmarks/rayservice_upgrade.py, not the suite) the third block changes the cluster's
   image (NewCluster) during a stream that follows the
   serve service as a cluster IP would (`ServiceRoute`; a port-forward holds on to one pod of
   the old cluster): traffic moves once the new cluster's slice is whole and its application
   RUNNING, the old cluster is deleted, and no request fails;
4. Ray is killed on one host of the serving slice during that stream: the slice leaves the
   service and comes back once healed; only requests on the slice fail.

The same world then runs examples/rayservice-slice-model-local.yaml (issue #35's last point):
each Serve replica reserves a whole slice with `ray.util.tpu.slice_placement_group`, and Serve
autoscaling, under load, adds a second replica whose reservation brings a second slice through
Ray's autoscaler and the operator, then removes it whole once the load is gone.

The figures (times from each change, answered and failed requests) are printed as
`E2E-FIGURES` lines for the README. Run under `flock /tmp/realray.lock`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib
import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import yaml

from raycluster_operator.controller.crds import rayservice_crd_manifest
from raycluster_operator.kube import PODS, RAYCLUSTERS, RAYSERVICES, SERVICES, KubeError, NotFound
from tests.harness.examples import README, example, readme_block
from tests.harness.pods import HOST_INDEX
from tests.harness.ray_world import (
    LIGHT_ENV,
    REAL_RAY_MODULE,
    RayWorld,
    eventually,
    labels_of,
)

EXAMPLE = example("rayservice-tpu-v5p-2x2x2-local")
#: Where the pods import the application from (the README's `export PYTHONPATH=...`).
APP_DIR = EXAMPLE.parent / "serve"
BIN = Path(sys.executable).parent
HEADING = "### RayService quickstart"
#: The stream: one request every STREAM_GAP seconds, each given REQUEST_TIMEOUT to answer.
STREAM_GAP = 0.05
REQUEST_TIMEOUT = 10.0
NAME = "slice-hosts"
#: The dev cluster of the README: two TPU v5p 2x2x2 pools (a NewCluster upgrade runs two
#: clusters of one 2-host slice at once) and a CPU node for both heads.
NODES = ["tpu:v5p:2x2x2:2", "cpu:1"]
#: The slice's hosts (their hostnames: the same in every cluster of the service).
HOSTS = ("tpu-v5p-0-0", "tpu-v5p-0-1")
SERVE_PORT = 8000
SERVE_LABEL = "ray.io/serve"
#: How often the test's stand-in for kube-proxy reads the serve service's endpoints.
ENDPOINTS_EVERY = 0.25
#: An answer of the application in a block's output (curl prints no newline after it).
ANSWER = re.compile(r'\{"version":[^{}]*\}')

#: The quickstart and the slice-scaling test on one world: 161 s near quiet (one run); the
#: quickstart alone, as `make test` runs it, ~70 s.
pytestmark = [*REAL_RAY_MODULE, pytest.mark.slow(seconds=100)]


def readme_blocks() -> tuple[str, str, str]:
    """The section's three shell blocks: the first after its `export` and `dev` lines (the
    test starts the same dev cluster itself and sets the environment), the others as
    written."""
    first = readme_block(HEADING)
    lines = first.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("--apply"))
    text = README.read_text()
    rest = text[text.index(HEADING) :]
    rest = rest[rest.index("```\n") + 4 :]
    blocks = []
    for _ in range(2):
        rest = rest[rest.index("```sh\n") + 6 :]
        blocks.append(rest[: rest.index("```")])
        rest = rest[rest.index("```") + 3 :]
    return "\n".join(lines[start + 1 :]) + "\n", blocks[0], blocks[1]


@dataclass
class Stream:
    """Requests sent one after another to the serve service, each answer kept with the time it
    was sent (loop time); a failure is an error, a status other than 200, or no endpoint to
    send it to. ``target`` gives each request's URL (None: the service has no endpoint);
    ``fresh``: a new connection for each request, as curl in a loop makes (a cluster IP sends
    a connection to one endpoint for its whole life)."""

    target: Callable[[], str | None]
    fresh: bool = False
    answers: list[tuple[float, str]] = field(default_factory=list)
    failures: list[tuple[float, str]] = field(default_factory=list)

    async def run(self, stop: asyncio.Event, bound: float) -> None:
        loop = asyncio.get_running_loop()
        timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)
        ends = loop.time() + bound
        connector = aiohttp.TCPConnector(force_close=self.fresh)
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as http:
            while not stop.is_set() and loop.time() < ends:
                sent = loop.time()
                url = self.target()
                if url is None:
                    self.failures.append((sent, "no endpoint"))
                else:
                    await self._send(http, url, sent)
                await asyncio.sleep(STREAM_GAP)

    async def _send(self, http: aiohttp.ClientSession, url: str, sent: float) -> None:
        try:
            async with http.get(url) as resp:
                body = await resp.text()
                if resp.status == 200:
                    self.answers.append((sent, body))
                else:
                    self.failures.append((sent, f"{url}: HTTP {resp.status}: {body[:200]}"))
        except (aiohttp.ClientError, TimeoutError) as error:
            self.failures.append((sent, f"{url}: {error!r}"))

    def tail(self, count: int) -> list[tuple[float, str, str]]:
        return self.versions()[-count:]

    def parsed(self) -> list[tuple[float, dict[str, str]]]:
        return [(at, json.loads(body)) for at, body in self.answers]

    def versions(self) -> list[tuple[float, str, str]]:
        """(time, version, host) of every answer."""
        return [(at, str(a["version"]), str(a["host"])) for at, a in self.parsed()]


@dataclass
class ServiceRoute:
    """What kube-proxy does for the serve service's cluster IP, which the dev cluster does not
    run (and `kubectl port-forward svc/...` holds on to the one pod it picked at start, which a
    NewCluster upgrade deletes): the service's endpoints are the Ready, not terminating pods
    its selector matches, looked up again every ENDPOINTS_EVERY seconds; each request goes to
    the next endpoint's serve port, round robin."""

    kube: Any
    name: str
    ips: list[str] = field(default_factory=list)
    turn: int = 0

    def next_url(self) -> str | None:
        if not self.ips:
            return None
        self.turn += 1
        return f"http://{self.ips[self.turn % len(self.ips)]}:{SERVE_PORT}/"

    async def follow(self, stop: asyncio.Event) -> None:
        """Look the endpoints up until ``stop`` (the caller's first lookup is ``refresh``)."""
        while not stop.is_set():
            await asyncio.sleep(ENDPOINTS_EVERY)
            with contextlib.suppress(KubeError):
                await self.refresh()

    async def refresh(self) -> None:
        self.ips = await self._endpoints()

    async def _endpoints(self) -> list[str]:
        service = await self.kube.get(SERVICES, "default", self.name)
        selector = service["spec"]["selector"]
        wanted = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
        listing = await self.kube.list(PODS, "default", label_selector=wanted)
        return sorted(ip for pod in listing.items if (ip := _endpoint(pod)))


def _endpoint(pod: dict[str, Any]) -> str:
    """The pod's IP when an EndpointSlice would list it as ready ("" when not)."""
    status = pod.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    terminating = bool(pod["metadata"].get("deletionTimestamp"))
    return str(status.get("podIP") or "") if ready and not terminating else ""


async def until_answered(stream: Stream, version: str) -> None:
    """Until the stream has had an answer of ``version`` (a failure before it fails the test:
    the service is serving when the change begins)."""
    while not any(v == version for _, v, _ in stream.versions()):
        assert not stream.failures, stream.failures[:5]
        await asyncio.sleep(0.2)


async def until_rolled(stream: Stream, streaming: asyncio.Task[None]) -> None:
    """Until both hosts have answered with the new code and the last answers are all new."""
    while True:
        assert not streaming.done(), f"the stream ended first: {stream.versions()[-10:]}"
        recent = stream.tail(40)
        rolled = len(recent) == 40 and all(v == "v2" for _, v, _ in recent)
        if rolled and len({h for _, v, h in stream.versions() if v == "v2"}) == 2:
            return
        await asyncio.sleep(0.5)


@contextlib.asynccontextmanager
async def port_forward(env: dict[str, str], target: str) -> AsyncIterator[int]:
    """`kubectl port-forward TARGET :8000`: a local port of kubectl's choosing (the README's
    8000 may be in use on a shared machine); yields that port."""
    proc = await asyncio.create_subprocess_exec(
        "kubectl",
        "port-forward",
        target,
        ":8000",
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        found = re.search(r"127\.0\.0\.1:(\d+) ->", line)
        assert found, f"kubectl port-forward said: {line!r}"
        yield int(found.group(1))
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()


async def shell(env: dict[str, str], script: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        "bash",
        "-ec",
        "set -x\n" + script,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    text = out.decode(errors="replace")
    assert proc.returncode == 0, text[-6000:]
    return text


def require_serve() -> None:
    """Fail at once, saying why, when Ray Serve's dependencies are missing: the pods run this
    interpreter, and without them the application never deploys and the README's wait would
    only time out."""
    try:
        importlib.import_module("ray.serve")
    except ImportError as error:
        pytest.fail(f"Ray Serve cannot be imported ({error}): pip install -e '.[ray]'")


async def active_cluster(world: RayWorld) -> str:
    service = await world.kube.get(RAYSERVICES, "default", NAME)
    return str(service["status"]["activeServiceStatus"]["rayClusterName"])


async def in_place_phase(world: RayWorld, env: dict[str, str], block: str) -> None:
    """The README's second block during a stream through `kubectl port-forward`: the new code
    rolls in place on the same cluster, with no failed request."""
    cluster = await active_cluster(world)
    async with port_forward(env, f"svc/{NAME}-serve-svc") as port:
        url = f"http://127.0.0.1:{port}/"
        stream = Stream(lambda: url)
        stop = asyncio.Event()
        streaming = asyncio.create_task(stream.run(stop, bound=900))
        await until_answered(stream, "v1")
        loop = asyncio.get_running_loop()
        changed = loop.time()  # the block's first command is the spec change
        text = await shell(env, block)
        assert cluster in text, text[-6000:]  # the same RayCluster serves
        await until_rolled(stream, streaming)
        stop.set()
        await streaming

    after = await world.kube.get(RAYSERVICES, "default", NAME)
    assert after["status"]["activeServiceStatus"]["rayClusterName"] == cluster
    assert not (after["status"].get("pendingServiceStatus") or {}).get("rayClusterName")
    seen = stream.versions()
    first_v2 = min(at for at, version, _ in seen if version == "v2")
    last_v1 = max(at for at, version, _ in seen if version == "v1")
    print(
        f"E2E-FIGURES serveConfigV2 change: first v2 answer {first_v2 - changed:.1f} s, "
        f"last v1 answer {last_v1 - changed:.1f} s after the patch; "
        f"{len(stream.answers)} answered, {len(stream.failures)} failed"
    )
    assert not stream.failures, stream.failures[:20]
    assert {host for _, version, host in seen if version == "v2"} == set(HOSTS)


async def new_cluster_phase(
    world: RayWorld, env: dict[str, str], block: str, stream: Stream
) -> str:
    """The README's third block (a new image: NewCluster) during ``stream``, which follows the
    serve service: traffic moves to the new cluster once its slice is whole and its
    application RUNNING, the old cluster is deleted, and no request fails. Returns the new
    cluster's name."""
    old = await active_cluster(world)
    await until_served_by(stream, old, since=0.0)
    loop = asyncio.get_running_loop()
    changed = loop.time()  # the block's second command is the spec change
    text = await shell(env, block)
    done = loop.time()
    new = await active_cluster(world)
    assert new != old and new in text, text[-6000:]

    async def old_pods_gone() -> None:
        assert not await world.pods(old, live=False)

    await eventually(old_pods_gone, within=120)
    await until_served_by(stream, new, since=done)
    seen = [(at, a) for at, a in stream.parsed() if at >= changed]
    first_new = min(at for at, a in seen if a["cluster"] == new)
    last_old = max(at for at, a in seen if a["cluster"] == old)
    failed = [f for f in stream.failures if f[0] >= changed]
    print(
        f"E2E-FIGURES NewCluster upgrade: first answer of the new cluster {first_new - changed:.1f}"
        f" s, last of the old {last_old - changed:.1f} s after the patch, old cluster deleted "
        f"{done - changed:.1f} s after it; {len(seen)} answered, {len(failed)} failed"
    )
    assert not stream.failures, stream.failures[:20]
    assert {a["host"] for at, a in seen if a["cluster"] == new} == set(HOSTS)
    return new


async def until_served_by(stream: Stream, cluster: str, since: float) -> None:
    """Until both hosts of ``cluster`` have answered requests sent after ``since``."""
    while True:
        served = {a["host"] for at, a in stream.parsed() if at > since and a["cluster"] == cluster}
        if served == set(HOSTS):
            return
        await asyncio.sleep(0.2)


async def host_kill_phase(world: RayWorld, cluster: str, stream: Stream) -> None:
    """Ray dies on host 1 of the serving slice (its raylet is killed; the container exits and
    the kubelet restarts it, as after a crash) during ``stream``: the slice leaves the serve
    service until Serve has a replica on the restarted host again and the slice is whole;
    the head's proxy serves from host 0's replica meanwhile. Only requests on the slice may
    fail: those sent to its pods (a cluster IP's endpoints lag the pod's readiness too) and
    those Serve had sent to the dying replica."""
    pods = await world.workers(cluster)
    workers = {labels_of(p)[HOST_INDEX]: p["metadata"]["name"] for p in pods}
    on_slice = tuple(f"http://{p['status']['podIP']}:{SERVE_PORT}/" for p in pods)
    loop = asyncio.get_running_loop()
    killed = loop.time()
    world.kill_process(workers["1"], "raylet")
    left: list[float] = []

    async def back() -> float:
        pods = await world.workers(cluster)
        serving = [labels_of(p).get(SERVE_LABEL) == "true" and _endpoint(p) for p in pods]
        if not all(serving) and not left:
            left.append(loop.time())
        assert left and len(pods) == 2 and all(serving), [labels_of(p) for p in pods]
        return loop.time()

    returned = await world.while_progressing(cluster, back)
    await until_served_by(stream, cluster, since=returned)
    restarted = first_of_a_new_replica(stream, cluster, killed)
    window = [(at - killed, why) for at, why in stream.failures if at >= killed - REQUEST_TIMEOUT]
    print(
        f"E2E-FIGURES host kill: the slice left the serve service {left[0] - killed:.1f} s after "
        f"the kill and was back {returned - killed:.1f} s after it; the restarted host's first "
        f"answer {restarted - killed:.1f} s after it; "
        f"{sum(1 for at, _ in stream.answers if at >= killed)} answered, {len(window)} failed "
        f"(the slice's pods: {on_slice}): {[(round(t, 2), why[:160]) for t, why in window]}"
    )
    # Through another pod's proxy only what Serve had sent to the dying replica before the
    # slice left the service (one request at a time: the one in flight, the one after it).
    elsewhere = [t for t, why in window if not why.startswith(on_slice)]
    assert len(elsewhere) <= 2 and all(t <= left[0] - killed for t in elsewhere), window
    assert all(t <= returned - killed for t, _ in window), window


def first_of_a_new_replica(stream: Stream, cluster: str, killed: float) -> float:
    """When host 1 of ``cluster`` first answered from a new replica after ``killed``: the v2
    code counts the requests its replica served, so a count lower than the one before is a
    new replica (the dying one may still answer for a moment)."""
    last = 0
    for at, a in stream.parsed():
        if a["cluster"] != cluster or a["worker"] != "1":
            continue
        count = int(a["served_by_this_replica"])
        if at > killed and count < last:
            return at
        last = count
    raise AssertionError("host 1 never answered from a new replica")


async def upgrade_and_host_kill(world: RayWorld, env: dict[str, str], third: str) -> None:
    """The README's third block (NewCluster) and a host kill, during one stream that follows
    the serve service; run by benchmarks/rayservice_upgrade.py (two real Ray clusters at once
    do not fit the suite's budget)."""
    route = ServiceRoute(world.kube, f"{NAME}-serve-svc")
    await route.refresh()
    assert route.ips, "the serve service has no endpoint"
    stream = Stream(route.next_url, fresh=True)
    stop = asyncio.Event()
    tasks = [
        asyncio.create_task(route.follow(stop)),
        asyncio.create_task(stream.run(stop, bound=1200)),
    ]
    try:
        new = await new_cluster_phase(world, env, third, stream)
        await host_kill_phase(world, new, stream)
    finally:
        stop.set()
        await asyncio.gather(*tasks)


@dataclass
class ServeWorld:
    """The README's dev cluster with the operator, and kubectl's environment for it."""

    world: RayWorld
    env: dict[str, str]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ServeWorld]:
    require_serve()
    world = await RayWorld.start(NODES, runtime="process")
    try:
        # What the README's `export PYTHONPATH=...` gives the pods (they get the host's
        # environment, as `raycluster-operator dev` does), with Ray's quiet settings.
        settings = world.runtime.settings
        path = os.pathsep.join(p for p in (str(APP_DIR), os.environ.get("PYTHONPATH")) if p)
        world.runtime.settings = dataclasses.replace(
            settings, base_env={**settings.base_env, **LIGHT_ENV, "PYTHONPATH": path}
        )
        await world.cluster.apply(rayservice_crd_manifest())
        # What `raycluster-operator dev` does on the process runtime: the operator on the
        # host reaches each head's dashboard and proxy at the head pod's IP.
        await world.start_operator(jobs_api_via="head-pod-ip", serve_api_via="head-pod-ip")
        kubeconfig = world.cluster.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PATH": f"{BIN}:{os.environ['PATH']}"}
        yield ServeWorld(world, env)
    finally:
        await world.close()


async def test_the_readme_rayservice_quickstart(served: ServeWorld) -> None:
    world, env = served.world, served.env
    await world.cluster.apply(yaml.safe_load(EXAMPLE.read_text()))
    first, second, _ = readme_blocks()

    text = await shell(env, first)
    hosts = {json.loads(answer)["host"] for answer in ANSWER.findall(text)}
    assert hosts == set(HOSTS), text[-6000:]
    await in_place_phase(world, env, second)


# -- Serve replicas that each reserve a whole slice, scaled by Serve (issue #35) ---------------

SLICE_MODEL = example("rayservice-slice-model-local")
MODEL = "slice-model"
#: Concurrent request loops of the load (each request held 1 s on every host of its slice):
#: three ongoing requests against a target of one per replica ask Serve for its maximum, 2.
LOAD = 3
HOLD = "?hold=1"
#: The hostnames of each slice's hosts (`<group>-<index>-<host>`).
SLICE_HOSTS = {index: [f"tpu-v5p-{index}-0", f"tpu-v5p-{index}-1"] for index in (0, 1)}


async def remove_rayservice(world: RayWorld, name: str) -> None:
    """Deleted (its clusters and their pods go in the background, freeing their pool)."""
    with contextlib.suppress(NotFound):
        await world.kube.delete(RAYSERVICES, "default", name, propagation="Background")


async def serving_cluster(world: RayWorld, name: str) -> str:
    """The RayService's cluster once the service is Ready (waited for while it progresses)."""

    async def named() -> str:
        status = (await world.kube.get(RAYSERVICES, "default", name)).get("status") or {}
        for which in ("activeServiceStatus", "pendingServiceStatus"):
            cluster = (status.get(which) or {}).get("rayClusterName")
            if cluster:
                return str(cluster)
        raise AssertionError(f"no cluster named yet: {status}")

    cluster = await eventually(named, within=120)

    async def ready() -> None:
        status = (await world.kube.get(RAYSERVICES, "default", name)).get("status") or {}
        assert status.get("serviceStatus") == "Running", status.get("conditions")
        assert status["activeServiceStatus"]["rayClusterName"] == cluster, status

    await world.while_progressing(cluster, ready)
    return cluster


async def slices_of(world: RayWorld, cluster: str) -> list[tuple[str, str]]:
    """(replica index, host index) of every live worker pod."""
    return sorted(
        (labels_of(p)["ray.io/worker-group-replica-index"], labels_of(p)[HOST_INDEX])
        for p in await world.workers(cluster)
    )


async def ask_once(route: ServiceRoute) -> list[str]:
    """The hosts that served one request through the serve service."""
    stream = Stream(route.next_url)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as http:
        await stream._send(http, str(route.next_url()), 0.0)
    assert stream.answers, stream.failures
    (hosts,) = answered_by(stream)
    return hosts


def answered_by(stream: Stream, since: float = 0.0) -> list[list[str]]:
    """The hosts behind each answer sent after ``since`` (sorted: a slice's bundles need not
    follow its host indices)."""
    return [sorted(json.loads(body)["hosts"]) for at, body in stream.answers if at >= since]


async def test_serve_autoscaling_adds_and_removes_whole_slices(served: ServeWorld) -> None:
    world = served.world
    loop = asyncio.get_running_loop()
    await remove_rayservice(world, NAME)  # the quickstart's, when it ran first
    began = loop.time()
    await world.cluster.apply(yaml.safe_load(SLICE_MODEL.read_text()))
    cluster = await serving_cluster(world, MODEL)
    ready = loop.time()
    # The replica's actor is on the head: the slice's hosts hold no Serve proxy, yet they are
    # Ready (the raylet's readiness), the slice is whole and the service switched to it; the
    # hosts stay out of the serve service and the head's proxy serves.
    workers = await world.workers(cluster)
    assert len(workers) == 2 and all(_endpoint(p) for p in workers), workers
    assert {labels_of(p)[SERVE_LABEL] for p in workers} == {"false"}
    status = (await world.kube.get(RAYSERVICES, "default", MODEL))["status"]
    assert status["numServeEndpoints"] == 1
    route = ServiceRoute(world.kube, f"{MODEL}-serve-svc")
    await route.refresh()
    head = await world.head(cluster)
    assert route.ips == [head["status"]["podIP"]]
    assert await ask_once(route) == SLICE_HOSTS[0]

    # Load: Serve adds a replica, whose reservation brings a second slice, whole.
    stop = asyncio.Event()

    def held() -> str | None:
        url = route.next_url()
        return f"{url}{HOLD}" if url else None

    streams = [Stream(held) for _ in range(LOAD)]
    tasks = [asyncio.create_task(s.run(stop, bound=900)) for s in streams]
    tasks.append(asyncio.create_task(route.follow(stop)))
    loaded = loop.time()

    async def second_slice_serves() -> float:
        hosts = [h for s in streams for h in answered_by(s)]
        assert SLICE_HOSTS[1] in hosts, hosts[-5:]
        return loop.time()

    try:
        up = await world.while_progressing(cluster, second_slice_serves)
        assert await slices_of(world, cluster) == [("0", "0"), ("0", "1"), ("1", "0"), ("1", "1")]
        spec = (await world.kube.get(RAYCLUSTERS, "default", cluster))["spec"]
        assert spec["workerGroupSpecs"][0]["replicas"] == 2  # written by Ray's autoscaler
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    unloaded = loop.time()

    # No load: Serve stops the newest replica, its slice is idle and goes, both hosts at once
    # (every look on the way sees both slices whole, or slice 0 alone).
    seen: set[tuple[tuple[str, str], ...]] = set()

    async def back_to_one_slice() -> float:
        now = await slices_of(world, cluster)
        seen.add(tuple(now))
        assert now == [("0", "0"), ("0", "1")]
        spec = (await world.kube.get(RAYCLUSTERS, "default", cluster))["spec"]
        assert spec["workerGroupSpecs"][0]["replicas"] == 1
        return loop.time()

    down = await world.while_progressing(cluster, back_to_one_slice)
    both = (("0", "0"), ("0", "1"), ("1", "0"), ("1", "1"))
    assert seen <= {both, both[:2]}, seen
    answered = sum(len(s.answers) for s in streams)
    failed = [f for s in streams for f in s.failures]
    print(
        f"E2E-FIGURES slice-spanning replicas: Ready {ready - began:.1f} s after the apply; "
        f"under load ({LOAD} requests held 1 s each) the second slice answered "
        f"{up - loaded:.1f} s after the load began; it was gone, whole, {down - unloaded:.1f} s "
        f"after the load ended; {answered} answered, {len(failed)} failed"
    )
    assert not failed, failed[:10]
    # Both slices served under the load, and the one left serves alone.
    assert {tuple(h) for s in streams for h in answered_by(s)} == {
        tuple(SLICE_HOSTS[0]),
        tuple(SLICE_HOSTS[1]),
    }
    assert await ask_once(route) == SLICE_HOSTS[0]
