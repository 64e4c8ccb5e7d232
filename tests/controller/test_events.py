"""Events: one core/v1 object per distinct event, repeats folded into its count."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from devkube.server import ApiServer
from raycluster_operator.controller.runtime.events import EventRecorder
from raycluster_operator.kube import CORE_EVENTS as EVENTS
from raycluster_operator.kube import KubeClient

CLUSTER = {
    "apiVersion": "ray.io/v1",
    "kind": "RayCluster",
    "metadata": {"name": "c", "namespace": "default", "uid": "u1"},
}


@pytest.fixture
async def server() -> AsyncIterator[ApiServer]:
    async with ApiServer() as api:
        yield api


@pytest.fixture
async def kube(server: ApiServer) -> AsyncIterator[KubeClient]:
    client = KubeClient.from_kubeconfig(server.kubeconfig_dict())
    yield client
    await client.close()


async def test_repeats_are_counted_on_one_event(kube: KubeClient) -> None:
    recorder = EventRecorder(kube, instance="test")
    for _ in range(3):
        await recorder.emit(CLUSTER, "Warning", "InvalidSpec", "bad", action="Validate")
    await recorder.emit(CLUSTER, "Normal", "ScaleUp", "creating", action="CreatePod")
    events = (await kube.list(EVENTS, "default")).items
    assert len(events) == 2
    invalid = next(e for e in events if e["reason"] == "InvalidSpec")
    assert invalid["count"] == 3
    assert invalid["involvedObject"] == {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "name": "c",
        "namespace": "default",
        "uid": "u1",
    }
    assert invalid["reportingComponent"] == "ray.io/raycluster-operator"
    assert invalid["reportingInstance"] == "test"
    assert invalid["type"] == "Warning" and invalid["action"] == "Validate"


async def test_an_event_after_the_window_is_a_new_object(kube: KubeClient) -> None:
    now = [0.0]
    recorder = EventRecorder(kube, window=60, clock=lambda: now[0])
    await recorder.emit(CLUSTER, "Normal", "ScaleUp", "x", action="CreatePod")
    now[0] = 61.0
    await recorder.emit(CLUSTER, "Normal", "ScaleUp", "x", action="CreatePod")
    assert len((await kube.list(EVENTS, "default")).items) == 2


async def test_a_failing_event_write_never_raises(server: ApiServer, kube: KubeClient) -> None:
    server.faults.fail("create", "events", code=500)
    await EventRecorder(kube).emit(CLUSTER, "Normal", "ScaleUp", "x", action="CreatePod")
    assert kube.counts["create"] == 1


async def test_many_similar_events_fold_into_one_combined_event(kube: KubeClient) -> None:
    """client-go's aggregator: past 10 distinct notes with one object, type and reason in the
    window, the rest are one "(combined from similar events)" Event whose count grows."""
    recorder = EventRecorder(kube, instance="test")
    for i in range(25):
        await recorder.emit(
            CLUSTER, "Warning", "HostFailed", f"slice s{i} at index {i}", action="DeletePod"
        )
    events = (await kube.list(EVENTS, "default")).items
    assert len(events) == 11
    combined = [e for e in events if e["message"].startswith("(combined from similar events): ")]
    assert len(combined) == 1
    assert combined[0]["count"] == 15
    # A different reason is not similar: it gets its own Event.
    await recorder.emit(CLUSTER, "Normal", "ScaleUp", "creating", action="CreatePod")
    assert len((await kube.list(EVENTS, "default")).items) == 12


async def test_core_v1_readers_see_kuberays_recorder_fields(kube: KubeClient) -> None:
    """firstTimestamp, lastTimestamp, count and source, as client-go's core/v1 recorder
    writes them (issue 38 item 3: `--sort-by=.lastTimestamp` found nothing)."""
    recorder = EventRecorder(kube, instance="test")
    await recorder.emit(CLUSTER, "Warning", "InvalidSpec", "bad", action="Validate")
    first = (await kube.list(EVENTS, "default")).items[0]
    assert first["count"] == 1
    assert first["source"] == {"component": "ray.io/raycluster-operator"}
    assert first["firstTimestamp"] == first["lastTimestamp"]
    assert first["lastTimestamp"].endswith("Z")
    await recorder.emit(CLUSTER, "Warning", "InvalidSpec", "bad", action="Validate")
    (again,) = (await kube.list(EVENTS, "default")).items
    assert again["count"] == 2
    assert again["firstTimestamp"] == first["firstTimestamp"]
    assert again["lastTimestamp"] >= first["lastTimestamp"]
