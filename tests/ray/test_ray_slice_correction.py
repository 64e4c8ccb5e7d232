"""The sidecar's slice-scaling correction (design rule 7b), against the installed Ray.

First Ray 2.60 as it ships, to pin the two gaps the correction stands in for; then the same
calls with `slice_autoscaler.install()` applied (undone after each test): Ray's own
`AutoscalingConfigProducer` then gives a TPU node type the labels of a slice head, and Ray's
own `KubeRayProvider` turns a launch of one node into one whole slice, from 0 and from 1,
while terminations keep Ray's arithmetic.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest

import ray
from raycluster_operator.sidecar import slice_autoscaler

HOSTS = 4
# No skip on another Ray: the installed Ray is one the correction is written for, or
# tests/test_ray_versions.py fails, and so do these.


def _replicas(world: Any, ns: str, name: str) -> int:
    return int(world.get_cluster(ns, name)["spec"]["workerGroupSpecs"][0]["replicas"])


def test_ray_as_shipped_cannot_launch_a_slice_for_a_slice_head(
    world: Any, ns: str, kit: Any
) -> None:
    """The two gaps, pinned: no labels on the node type; one node floored to 0 slices."""
    world.create_cluster(ns, kit.raycluster("bare", kit.tpu_group(max_replicas=2)))
    world.wait("the head pod", lambda: world.live_names(ns, "bare", "headgroup"))
    types = world.autoscaling_config(ns, "bare")["available_node_types"]
    assert types["tpu"]["labels"] == {}
    provider = world.v2_provider(ns, "bare")
    provider.launch({"tpu": 1}, "one-node")
    assert [str(e) for e in provider.poll_errors()] == []
    assert _replicas(world, ns, "bare") == 0  # (0 + 1) // 4


def test_a_tpu_node_type_carries_the_slice_heads_labels(
    world: Any, ns: str, kit: Any, corrected: None
) -> None:
    cluster = kit.raycluster(
        "cfg", kit.tpu_group("tpu", max_replicas=2), kit.cpu_group("cpu", max_replicas=2)
    )
    world.create_cluster(ns, cluster)
    types = world.autoscaling_config(ns, "cfg")["available_node_types"]
    # What reserve_tpu_slice selects: worker 0 of a slice of this pod type.
    assert types["tpu"]["labels"] == {"ray.io/tpu-pod-type": "v6e-16", "ray.io/tpu-worker-id": "0"}
    assert types["cpu"]["labels"] == {}
    assert types["headgroup"]["labels"] == {}
    # Ray's v2 config reads them as the node type's labels (what its scheduler matches).
    config_mod = importlib.import_module("ray.autoscaler.v2.instance_manager.config")
    config = config_mod.AutoscalingConfig(world.autoscaling_config(ns, "cfg"))
    assert config.get_node_type_configs()["tpu"].labels["ray.io/tpu-worker-id"] == "0"


def test_group_labels_the_user_set_are_kept(world: Any, ns: str, kit: Any, corrected: None) -> None:
    group = kit.tpu_group("tpu", max_replicas=2)
    group["labels"] = {"ray.io/tpu-worker-id": "0", "team": "a"}
    world.create_cluster(ns, kit.raycluster("own", group))
    labels = world.autoscaling_config(ns, "own")["available_node_types"]["tpu"]["labels"]
    assert labels == {"ray.io/tpu-worker-id": "0", "team": "a", "ray.io/tpu-pod-type": "v6e-16"}


def test_one_node_launches_one_whole_slice_from_zero_and_from_one(
    world: Any, ns: str, kit: Any, corrected: None
) -> None:
    world.create_cluster(ns, kit.raycluster("up", kit.tpu_group(max_replicas=2)))
    world.wait("the head pod", lambda: world.live_names(ns, "up", "headgroup"))
    provider = world.v2_provider(ns, "up")

    provider.launch({"tpu": 1}, "head-of-slice-1")
    assert [str(e) for e in provider.poll_errors()] == []
    assert _replicas(world, ns, "up") == 1
    first = world.wait_slices(ns, "up", "tpu", HOSTS, 1)

    provider.launch({"tpu": 1}, "head-of-slice-2")
    assert [str(e) for e in provider.poll_errors()] == []
    assert _replicas(world, ns, "up") == 2
    both = world.wait_slices(ns, "up", "tpu", HOSTS, 2)
    assert set(first) <= set(both)

    # Past maxReplicas Ray reports the launch as capped, as it does for whole slices.
    provider.launch({"tpu": 1}, "head-of-slice-3")
    assert _replicas(world, ns, "up") == 2
    assert any("maxReplicas" in str(e) for e in provider.poll_errors())

    # A termination keeps Ray's arithmetic: one host named, its slice goes, 2 -> 1.
    victim = both[1][0]["metadata"]["name"]
    provider.get_non_terminated()
    provider.terminate([victim], "one-host")
    assert [str(e) for e in provider.poll_errors()] == []
    assert _replicas(world, ns, "up") == 1
    world.wait_slices(ns, "up", "tpu", HOSTS, 1)


def test_the_arithmetic() -> None:
    desired = {"tpu": 5, "cpu": 3, "gone": 8}
    slice_autoscaler.round_launches_up(
        desired, {"tpu": 1, "cpu": 1, "gone": 0}, {"tpu": 4, "cpu": 1, "gone": 4}
    )
    assert desired == {"tpu": 8, "cpu": 3, "gone": 8}
    assert slice_autoscaler.hosts_by_group(
        {"spec": {"workerGroupSpecs": [{"groupName": "a", "numOfHosts": 2}, {"groupName": "b"}]}}
    ) == {"a": 2, "b": 1}
    assert not slice_autoscaler.corrected("2.61.0")


def test_an_idle_host_stays_while_its_slice_has_a_busy_host() -> None:
    """Correction 3: Ray's idle termination, but by slice. With Ray's own status enum."""
    from types import SimpleNamespace

    scheduler = importlib.import_module("ray.autoscaler.v2.scheduler")
    status = scheduler.SchedulingNodeStatus
    terminate, schedulable = status.TO_TERMINATE, status.SCHEDULABLE

    def node(iid: str, slice_name: str | None, state: Any) -> Any:
        labels = {"ray.io/tpu-slice-name": slice_name} if slice_name else {}
        return SimpleNamespace(
            im_instance_id=iid,
            node_type="tpu",
            labels=labels,
            status=state,
            termination_request=object() if state == terminate else None,
        )

    nodes = [
        node("a0", "tpu-0", schedulable),  # slice 0's head, held by a reservation
        node("a1", "tpu-0", terminate),  # its idle host, marked by Ray this pass
        node("b0", "tpu-1", terminate),  # slice 1: both hosts idle, both marked
        node("b1", "tpu-1", terminate),
        node("p", None, terminate),  # a pending node (no Ray labels yet)
    ]
    kept = slice_autoscaler.keep_slices_whole(
        nodes, {"a1", "b0", "b1", "p"}, terminate, schedulable
    )
    assert [n.im_instance_id for n in kept] == ["a1"]
    assert [n.status for n in nodes] == [schedulable, schedulable, terminate, terminate, terminate]
    assert nodes[1].termination_request is None
    # A GPU NVLink domain is a slice too.
    gpu = [
        SimpleNamespace(
            im_instance_id=i,
            node_type="nvl",
            labels={"ray.io/gpu-domain": "nvl-0"},
            status=s,
            termination_request=None,
        )
        for i, s in (("g0", schedulable), ("g1", terminate))
    ]
    assert len(slice_autoscaler.keep_slices_whole(gpu, {"g1"}, terminate, schedulable)) == 1


def test_install_wraps_rays_scheduler(corrected: None) -> None:
    scheduler = importlib.import_module("ray.autoscaler.v2.scheduler")
    wrapped = scheduler.ResourceDemandScheduler._enforce_idle_termination
    assert wrapped.__name__ == "enforce_idle_by_slice"


def _idle_context(scheduler: Any, idle_ms: dict[str, int], min_nodes: int) -> Any:
    """Ray's own ScheduleContext over two running 2-host slices, every host idle for
    ``idle_ms[instance id]`` against a 10 s timeout."""
    instance = importlib.import_module("ray.core.generated.instance_manager_pb2").Instance
    config = importlib.import_module("ray.autoscaler.v2.instance_manager.config")
    tpu = {"TPU": 4.0, "CPU": 1.0}
    nodes = [
        scheduler.SchedulingNode(
            node_type="tpu",
            total_resources=dict(tpu),
            available_resources=dict(tpu),
            labels={"ray.io/tpu-slice-name": f"tpu-{iid[0]}"},
            status=scheduler.SchedulingNodeStatus.SCHEDULABLE,
            im_instance_id=iid,
            im_instance_status=instance.RAY_RUNNING,
            ray_node_id=f"ray-{iid}",
            idle_duration_ms=ms,
        )
        for iid, ms in idle_ms.items()
    ]
    types = {"tpu": config.NodeTypeConfig("tpu", min_nodes, 4, resources=tpu)}
    return scheduler.ResourceDemandScheduler.ScheduleContext(
        nodes, types, {}, {}, disable_launch_config_check=True, idle_timeout_s=10
    )


@pytest.mark.parametrize(
    "idle_ms",
    [
        # Released together: the hosts' idle times interleave across the slices.
        {"a0": 40_000, "b0": 39_000, "a1": 38_000, "b1": 37_000},
        {"a0": 40_000, "a1": 39_000, "b0": 38_000, "b1": 37_000},
    ],
)
def test_idle_slices_down_to_min_replicas_go_whole(
    corrected: None, idle_ms: dict[str, int]
) -> None:
    """minReplicas 1 on 2-host slices (min_worker_nodes 2), two idle slices: Ray's budget of
    2 terminations is spent on one whole slice, never one host of each (which the idle
    correction would keep, both, on every pass: the group would never scale down)."""
    scheduler = importlib.import_module("ray.autoscaler.v2.scheduler")
    ctx = _idle_context(scheduler, idle_ms, min_nodes=2)
    scheduler.ResourceDemandScheduler._enforce_idle_termination(ctx)
    going = sorted(
        n.im_instance_id
        for n in ctx.get_nodes()
        if n.status == scheduler.SchedulingNodeStatus.TO_TERMINATE
    )
    assert going in (["a0", "a1"], ["b0", "b1"])
    # Ray's own order is back once the pass is over.
    assert scheduler.ResourceDemandScheduler._sort_nodes_for_termination.__name__ == (
        "_sort_nodes_for_termination"
    )


def test_another_ray_runs_untouched(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another version, or Ray's internals not where the correction expects them: Ray's
    autoscaler runs as shipped (the sidecar must never fail to start on a Ray we did not pin),
    and the log says why."""
    scheduler = importlib.import_module("ray.autoscaler.v2.scheduler").ResourceDemandScheduler
    shipped = scheduler.__dict__["_enforce_idle_termination"]
    monkeypatch.setattr(ray, "__version__", "2.61.0")
    assert not slice_autoscaler.install()
    assert "not applied: written for Ray" in capsys.readouterr().out
    monkeypatch.setattr(ray, "__version__", "2.60.9")

    def moved() -> Any:
        raise ImportError("No module named 'ray.autoscaler.v2.scheduler'")

    monkeypatch.setattr(slice_autoscaler, "_ray_internals", moved)
    assert not slice_autoscaler.install()
    assert "lacks what it wraps" in capsys.readouterr().out
    assert scheduler.__dict__["_enforce_idle_termination"] is shipped
