"""One lifecycle every hardening test drives: scale up, a failed host, a lost node, the
autoscaler's workersToDelete, scale down. Each step waits for convergence while the checker
watches; ``hook`` runs between steps (the crash tests kill the operator there)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from tests.harness.hardening_world import (
    GROUP,
    HOST,
    INDEX,
    World,
    cpu_group,
    eventually,
    labels,
    raycluster,
)
from tests.harness.hardening_world import tpu_group as tpu

NODES = ["tpu:v6e:4x4:5", "cpu:8"]
Hook = Callable[[str], Awaitable[None]]


@dataclass
class Timings:
    steps: dict[str, float] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(self.steps.values())


async def _nothing(_step: str) -> None:
    return None


async def lifecycle(
    world: World, name: str, *, hook: Hook = _nothing, within: float = 60.0
) -> Timings:
    timings = Timings()

    async def step(label: str, action: Callable[[], Awaitable[object]]) -> None:
        started = time.monotonic()
        await action()
        await hook(label)
        await eventually(lambda: world.converged(name), within=within)
        timings.steps[label] = time.monotonic() - started

    async def create() -> None:
        await world.create(raycluster(name, [tpu("tpu", 1), cpu_group("mh", 2, hosts=2)]))

    await step("create", create)
    await step("scale-up", lambda: _scale_up(world, name))
    await step("host-failure", lambda: _fail_host(world, name))
    await step("node-failure", lambda: _fail_node(world, name))
    await step("workers-to-delete", lambda: _workers_to_delete(world, name))
    await step("scale-down", lambda: _scale_down(world, name))
    return timings


async def _scale_up(world: World, name: str) -> None:
    await world.set_group(name, "tpu", replicas=3)
    await world.set_group(name, "mh", replicas=4)


async def _fail_host(world: World, name: str) -> None:
    pod = _one(await world.pods(name), "tpu", index=1, host=2)
    await world.cluster.fail_pod("default", pod["metadata"]["name"])


async def _fail_node(world: World, name: str) -> None:
    pod = _one(await world.pods(name), "mh", index=0, host=1)
    node = pod["spec"]["nodeName"]
    await world.cluster.fail_node(node)
    # The node comes back once the operator has acted on its lost pod; until the old pods are
    # gone from the API the operator must not reuse their index.
    await eventually(lambda: _acted_on(world, name, pod["metadata"]["name"]), within=30)
    await world.cluster.restore_node(node)


async def _acted_on(world: World, name: str, pod_name: str) -> None:
    still = [p for p in await world.pods(name) if p["metadata"]["name"] == pod_name]
    assert not still or still[0]["metadata"].get("deletionTimestamp")


async def _workers_to_delete(world: World, name: str) -> None:
    pods = await world.pods(name)
    victim = _one(pods, "tpu", index=0, host=3)
    await world.set_group(
        name,
        "tpu",
        replicas=2,
        scaleStrategy={"workersToDelete": [victim["metadata"]["name"], "no-such-pod"]},
    )


async def _scale_down(world: World, name: str) -> None:
    await world.set_group(name, "tpu", replicas=1, scaleStrategy={"workersToDelete": []})
    await world.set_group(name, "mh", replicas=1)


def _one(pods: list[dict[str, object]], group: str, *, index: int, host: int) -> dict:  # type: ignore[type-arg]
    for pod in pods:
        lbl = labels(pod)  # type: ignore[arg-type]
        if (
            lbl.get(GROUP) == group
            and lbl.get(INDEX) == str(index)
            and lbl.get(HOST) == str(host)
            and not pod["metadata"].get("deletionTimestamp")  # type: ignore[attr-defined]
        ):
            return pod  # type: ignore[return-value]
    raise AssertionError(f"no live pod {group}/{index}/{host}")
