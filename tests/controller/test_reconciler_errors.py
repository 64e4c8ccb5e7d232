"""Failed writes: retried with backoff, or (refused for good) recorded and left for a change."""

from __future__ import annotations

import asyncio

import pytest
from fake_kube import KEY, World, cpu_group, raycluster

from raycluster_operator.controller.raycluster.reconciler import Reconciler
from raycluster_operator.controller.raycluster.registration import ControllerOptions, RayClusters
from raycluster_operator.controller.runtime.controller import Controller
from raycluster_operator.controller.runtime.events import EventRecorder
from raycluster_operator.controller.runtime.metrics import ControllerMetrics
from raycluster_operator.controller.runtime.reconcile import ReconcileError, TerminalError
from raycluster_operator.kube import RAYCLUSTERS, Forbidden, Invalid, ServerError
from raycluster_operator.planning import PlanOptions
from tests.harness.waiting import eventually


def new_world() -> World:
    w = World()
    w.kube.put(RAYCLUSTERS, raycluster(cpu_group(replicas=2)))
    w.sync()
    return w


async def test_a_refused_pod_create_is_terminal_and_recorded_on_the_cluster() -> None:
    w = new_world()
    w.kube.fail("create", "pods", Invalid("spec.containers: Required value", code=422))
    with pytest.raises(TerminalError):
        await w.reconcile()
    (event,) = w.events("WriteRejected")
    assert event["type"] == "Warning" and "Required value" in event["message"]
    assert event["involvedObject"]["name"] == "c"
    # The rest of the pass still happened: service and status.
    assert w.kube.writes_of("create", "services") == ["c-head-svc"]
    assert w.kube.writes_of("patch", "rayclusters/status") == ["c"]


async def test_a_forbidden_status_write_is_terminal() -> None:
    w = new_world()
    w.kube.fail("patch", "rayclusters/status", Forbidden("no", code=403))
    with pytest.raises(TerminalError):
        await w.reconcile()


async def test_a_server_error_is_retried_not_terminal() -> None:
    w = new_world()
    w.kube.fail("create", "pods", ServerError("etcd timeout", code=503))
    with pytest.raises(ReconcileError) as caught:
        await w.reconcile()
    assert not isinstance(caught.value, TerminalError)
    assert w.events("WriteRejected") == []


async def test_one_retryable_failure_among_terminal_ones_makes_the_pass_retryable() -> None:
    w = new_world()
    w.kube.fail("create", "pods", Invalid("bad", code=422))
    w.kube.fail("create", "services", ServerError("later", code=500))
    with pytest.raises(ReconcileError) as caught:
        await w.reconcile()
    assert not isinstance(caught.value, TerminalError)


async def _controller_attempts(w: World, error: Exception) -> tuple[Controller[Reconciler], int]:
    """Run a controller term over the world until its first pass, with hot retries."""
    w.kube.fail("create", "pods", error)  # type: ignore[arg-type]
    options = ControllerOptions(retry_base_delay=0.001, retry_max_delay=0.001, resync_period=3600)
    kind = RayClusters(
        w.kube,  # type: ignore[arg-type]
        w.sources,
        options,
        PlanOptions(),
        metrics=w.metrics,
        recorder=EventRecorder(w.kube),  # type: ignore[arg-type]
    )
    controller = Controller(kind, options.loop(), metrics=ControllerMetrics(w.registry.registry))
    term = asyncio.create_task(controller.lead(stopping=lambda: True))
    try:
        await eventually(lambda: _assert(controller.reconciles >= 1))
        queue = controller.queue
        assert queue is not None
        return controller, queue.num_requeues(KEY)
    finally:
        term.cancel()
        await asyncio.gather(term, return_exceptions=True)


async def test_the_controller_does_not_retry_a_terminal_failure() -> None:
    w = new_world()
    controller, requeues = await _controller_attempts(w, Invalid("bad", code=422))
    assert requeues == 0
    assert controller.reconciles == 1
    assert controller.metrics.reconciles.labels("terminal")._value.get() == 1


async def test_the_controller_retries_a_server_error_with_backoff() -> None:
    w = new_world()
    _, requeues = await _controller_attempts(w, ServerError("later", code=503))
    assert requeues >= 1


def _assert(cond: bool) -> None:
    assert cond
