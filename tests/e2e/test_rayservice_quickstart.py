"""The README's "RayService quickstart", run as written on the process runtime, on real Ray
Serve: the RayService of examples/rayservice-tpu-v5p-2x2x2-local.yaml becomes Ready, `kubectl
port-forward svc/slice-hosts-serve-svc 8000` and curl get answers from both hosts of the TPU
slice; then the README's second block changes the application's code in serveConfigV2, and
while it runs a steady stream of requests through a port-forward of the serve service counts
what failed. The change rolls in place: the same RayCluster stays active, Serve replaces the
replicas, and no request fails (issue #35's goal). The figures (time from the spec change to
the first and last answers of each version, failed requests) are printed for the README.

Run under `flock /tmp/realray.lock`.
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
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
import yaml

from raycluster_operator.controller.crds import rayservice_crd_manifest
from raycluster_operator.kube import RAYSERVICES
from tests.harness.examples import README, example, readme_block
from tests.harness.ray_world import LIGHT_ENV, RayWorld

EXAMPLE = example("rayservice-tpu-v5p-2x2x2-local")
#: Where the pods import the application from (the README's `export PYTHONPATH=...`).
APP_DIR = EXAMPLE.parent / "serve"
BIN = Path(sys.executable).parent
HEADING = "### RayService quickstart"
#: The stream: one request every STREAM_GAP seconds, each given REQUEST_TIMEOUT to answer.
STREAM_GAP = 0.05
REQUEST_TIMEOUT = 10.0
#: An answer of the application in a block's output (curl prints no newline after it).
ANSWER = re.compile(r'\{"version":[^{}]*\}')

pytestmark = pytest.mark.slow(seconds=100)


def readme_blocks() -> tuple[str, str]:
    """The section's two shell blocks: the first after its `export` and `dev` lines (the test
    starts the same dev cluster itself and sets the environment), the second as written."""
    first = readme_block(HEADING)
    lines = first.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("--apply"))
    text = README.read_text()
    rest = text[text.index(HEADING) :]
    rest = rest[rest.index("```\n") + 4 :]
    second = rest[rest.index("```sh\n") + 6 :]
    return "\n".join(lines[start + 1 :]) + "\n", second[: second.index("```")]


@dataclass
class Stream:
    """Requests sent one after another to the serve service, each answer kept with its time
    since the stream began (loop time); a failure is an error or a status other than 200."""

    url: str
    answers: list[tuple[float, str]] = field(default_factory=list)
    failures: list[tuple[float, str]] = field(default_factory=list)

    async def run(self, stop: asyncio.Event, bound: float) -> None:
        loop = asyncio.get_running_loop()
        timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)
        ends = loop.time() + bound
        async with aiohttp.ClientSession(timeout=timeout) as http:
            while not stop.is_set() and loop.time() < ends:
                sent = loop.time()
                try:
                    async with http.get(self.url) as resp:
                        body = await resp.text()
                        if resp.status == 200:
                            self.answers.append((sent, body))
                        else:
                            self.failures.append((sent, f"HTTP {resp.status}: {body[:200]}"))
                except (aiohttp.ClientError, TimeoutError) as error:
                    self.failures.append((sent, repr(error)))
                await asyncio.sleep(STREAM_GAP)

    def tail(self, count: int) -> list[tuple[float, str, str]]:
        return self.versions()[-count:]

    def versions(self) -> list[tuple[float, str, str]]:
        """(time, version, host) of every answer."""
        out = []
        for at, body in self.answers:
            answer = json.loads(body)
            out.append((at, str(answer["version"]), str(answer["host"])))
        return out


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


async def test_the_readme_rayservice_quickstart(tmp_path: Path) -> None:
    require_serve()
    world = await RayWorld.start(["tpu:v5p:2x2x2:1", "cpu:1"], runtime="process")
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
        await world.cluster.apply(yaml.safe_load(EXAMPLE.read_text()))
        kubeconfig = world.cluster.write_kubeconfig(tmp_path / "kubeconfig")
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PATH": f"{BIN}:{os.environ['PATH']}"}
        first, second = readme_blocks()

        text = await shell(env, first)
        hosts = {json.loads(answer)["host"] for answer in ANSWER.findall(text)}
        assert hosts == {"tpu-v5p-0-0", "tpu-v5p-0-1"}, text[-6000:]
        before = await world.kube.get(RAYSERVICES, "default", "slice-hosts")
        cluster = before["status"]["activeServiceStatus"]["rayClusterName"]

        async with port_forward(env, "svc/slice-hosts-serve-svc") as port:
            stream = Stream(f"http://127.0.0.1:{port}/")
            stop = asyncio.Event()
            streaming = asyncio.create_task(stream.run(stop, bound=900))
            await until_answered(stream, "v1")
            loop = asyncio.get_running_loop()
            changed = loop.time()  # the second block's first command is the spec change
            text = await shell(env, second)
            assert cluster in text, text[-6000:]  # the same RayCluster serves
            await until_rolled(stream, streaming)
            stop.set()
            await streaming

        after = await world.kube.get(RAYSERVICES, "default", "slice-hosts")
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
        assert {host for _, version, host in seen if version == "v2"} == hosts
    finally:
        await world.close()
