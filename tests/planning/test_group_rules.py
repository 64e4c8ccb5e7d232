"""docs/design.md §4 rules 8-13 for one worker group, each rule as a small scenario."""

from __future__ import annotations

from typing import Any

from raycluster_operator.api.models import WorkerGroupSpec
from raycluster_operator.planning.group_plan import (
    GroupInput,
    GroupPlan,
    GroupSwitches,
    plan_group,
)
from raycluster_operator.planning.pods import read_pod
from raycluster_operator.planning.reasons import CreateReason, DeleteReason

from .world import make_pod, suffixes

STATIC = GroupSwitches(scale_down=True)
AUTOSCALED = GroupSwitches(scale_down=False)


def group(hosts: int = 4, replicas: int = 2, **extra: Any) -> WorkerGroupSpec:
    return WorkerGroupSpec.model_validate(
        {"groupName": "workers", "numOfHosts": hosts, "replicas": replicas, **extra}
    )


def slice_pods(
    index: int, name: str, hosts: int = 4, states: dict[int, str] | None = None, created: int = 0
) -> list[dict[str, Any]]:
    states = states or {}
    return [
        make_pod(
            f"{name}-h{h}",
            replica_index=index,
            replica_name=name,
            host_index=h,
            state=states.get(h, "ready"),
            created=created,
        )
        for h in range(hosts)
    ]


def plan(
    spec: WorkerGroupSpec,
    pods: list[dict[str, Any]],
    switches: GroupSwitches = STATIC,
    desired: int | None = None,
) -> GroupPlan:
    from raycluster_operator.planning.desired import desired_slices

    count = desired_slices(spec) if desired is None else desired
    return plan_group(GroupInput(spec, [read_pod(p) for p in pods], count, switches, suffixes()))


def deleted(p: GroupPlan) -> dict[str, DeleteReason]:
    return {d.name: d.reason for d in p.deletes}


def test_complete_replicas_at_desired_count_need_nothing() -> None:
    p = plan(group(), slice_pods(0, "workers-aaaaa") + slice_pods(1, "workers-bbbbb"))
    assert not p.deletes and not p.replicas
    assert p.tally.ready_slices == 2 and p.tally.ready_pods == 8


def test_a_failed_host_deletes_its_whole_replica_and_a_new_one_is_made() -> None:
    pods = slice_pods(0, "workers-aaaaa", states={2: "failed"}) + slice_pods(1, "workers-bbbbb")
    p = plan(group(), pods)
    assert deleted(p) == {f"workers-aaaaa-h{h}": DeleteReason.HOST_FAILED for h in range(4)}
    # Index 0 is still held by the old pods, so autoscaling-off waits for it (own index).
    assert p.replicas == ()
    # With autoscaling on too: a broken slice comes back at its own index, not another one.
    p = plan(group(), pods, AUTOSCALED)
    assert deleted(p) == {f"workers-aaaaa-h{h}": DeleteReason.HOST_FAILED for h in range(4)}
    assert p.replicas == ()


def test_a_broken_slice_comes_back_at_its_own_index_once_its_old_pods_are_gone() -> None:
    survivors = slice_pods(1, "workers-bbbbb")
    going = slice_pods(0, "workers-aaaaa", states={h: "terminating" for h in range(4)})
    for switches in (STATIC, AUTOSCALED):
        assert plan(group(), going + survivors, switches).replicas == ()
        p = plan(group(), survivors, switches)
        assert [r.index for r in p.replicas] == [0]


def test_a_slice_removed_by_workers_to_delete_does_not_hold_its_index() -> None:
    going = slice_pods(0, "workers-aaaaa", states={h: "terminating" for h in range(4)})
    spec = group(replicas=2, scaleStrategy={"workersToDelete": ["workers-aaaaa-h0"]})
    p = plan(spec, going + slice_pods(1, "workers-bbbbb"), AUTOSCALED)
    assert [r.index for r in p.replicas] == [2]


def test_crashed_ray_container_with_restart_never_counts_as_failed() -> None:
    pods = slice_pods(0, "workers-aaaaa", states={1: "crashed"})
    assert set(deleted(plan(group(replicas=1), pods)).values()) == {DeleteReason.HOST_FAILED}


def test_a_terminating_host_takes_the_rest_of_its_replica_but_is_not_deleted_again() -> None:
    pods = slice_pods(0, "workers-aaaaa", states={3: "terminating"})
    d = deleted(plan(group(replicas=1), pods))
    assert d == {f"workers-aaaaa-h{h}": DeleteReason.HOST_TERMINATING for h in range(3)}


def test_pending_hosts_are_part_of_a_complete_replica() -> None:
    pods = slice_pods(0, "workers-aaaaa", states={0: "pending", 3: "pending"})
    p = plan(group(replicas=1), pods)
    assert not p.deletes and not p.replicas
    assert p.tally.ready_slices == 0


def test_a_missing_host_makes_the_replica_incomplete() -> None:
    pods = slice_pods(0, "workers-aaaaa")[:3]
    assert set(deleted(plan(group(replicas=1), pods)).values()) == {DeleteReason.REPLICA_INCOMPLETE}


def test_duplicate_host_index_breaks_the_replica() -> None:
    pods = slice_pods(0, "workers-aaaaa")
    pods.append(make_pod("extra", replica_index=0, replica_name="workers-aaaaa", host_index=1))
    d = deleted(plan(group(replicas=1), pods))
    assert len(d) == 5 and set(d.values()) == {DeleteReason.DUPLICATE_HOST}


def test_a_replica_built_for_more_hosts_is_replaced_after_numofhosts_shrinks() -> None:
    pods = slice_pods(0, "workers-aaaaa", hosts=4)
    d = deleted(plan(group(hosts=2, replicas=1), pods))
    assert len(d) == 4 and set(d.values()) == {DeleteReason.REPLICA_SHAPE_CHANGED}


def test_multi_host_labels_on_a_single_host_group_are_the_wrong_shape() -> None:
    pods = slice_pods(0, "workers-aaaaa", hosts=1)
    d = deleted(plan(group(hosts=1, replicas=1), pods))
    assert set(d.values()) == {DeleteReason.REPLICA_SHAPE_CHANGED}


def test_pods_without_identity_are_replaced_not_ignored() -> None:
    pods = [make_pod(f"old-{i}") for i in range(4)]
    p = plan(group(replicas=1), pods)
    assert set(deleted(p).values()) == {DeleteReason.POD_WITHOUT_REPLICA_IDENTITY}
    assert len(p.deletes) == 4
    assert [(r.index, r.reason) for r in p.replicas] == [(0, CreateReason.REPLACE_REPLICA)]


def test_workers_to_delete_takes_the_whole_replica_in_the_same_pass() -> None:
    pods = slice_pods(0, "workers-aaaaa") + slice_pods(1, "workers-bbbbb")
    spec = group(replicas=1, scaleStrategy={"workersToDelete": ["workers-bbbbb-h2", "no-such-pod"]})
    p = plan(spec, pods, AUTOSCALED)
    assert deleted(p) == {f"workers-bbbbb-h{h}": DeleteReason.WORKERS_TO_DELETE for h in range(4)}
    assert not p.replicas


def test_workers_to_delete_is_prompt_even_when_replicas_still_wants_the_slice() -> None:
    pods = slice_pods(0, "workers-aaaaa") + slice_pods(1, "workers-bbbbb")
    spec = group(replicas=2, scaleStrategy={"workersToDelete": ["workers-aaaaa-h0"]})
    p = plan(spec, pods, AUTOSCALED)
    assert len(p.deletes) == 4
    assert [r.index for r in p.replicas] == [2]  # index 0 is still held by terminating pods


def test_scale_down_removes_highest_indices_first() -> None:
    pods = [
        *slice_pods(0, "workers-aaaaa"),
        *slice_pods(1, "workers-bbbbb"),
        *slice_pods(2, "workers-ccccc"),
    ]
    d = deleted(plan(group(replicas=1), pods))
    assert {n.split("-h")[0] for n in d} == {"workers-bbbbb", "workers-ccccc"}
    assert set(d.values()) == {DeleteReason.SCALE_DOWN}


def test_autoscaling_on_never_scales_down_by_itself() -> None:
    pods = slice_pods(0, "workers-aaaaa") + slice_pods(1, "workers-bbbbb")
    assert not plan(group(replicas=1), pods, AUTOSCALED).deletes


def test_random_pod_delete_scales_down_with_autoscaling_on() -> None:
    pods = slice_pods(0, "workers-aaaaa") + slice_pods(1, "workers-bbbbb")
    switches = GroupSwitches(scale_down=True)
    d = deleted(plan(group(replicas=1), pods, switches))
    assert {n.split("-h")[0] for n in d} == {"workers-bbbbb"}


def test_scale_up_fills_lowest_free_indices_with_all_hosts() -> None:
    pods = slice_pods(1, "workers-bbbbb")
    p = plan(group(replicas=3), pods)
    assert [(r.index, r.hosts, r.reason) for r in p.replicas] == [
        (0, (0, 1, 2, 3), CreateReason.SCALE_UP),
        (2, (0, 1, 2, 3), CreateReason.SCALE_UP),
    ]
    assert len({r.name for r in p.replicas}) == 2


def test_an_index_is_not_reused_while_an_older_replica_still_has_pods() -> None:
    pods = slice_pods(0, "workers-aaaaa", states={h: "terminating" for h in range(4)})
    p = plan(group(replicas=1), pods, AUTOSCALED)
    # Index 0 is not reused while its old pods exist; a broken slice's replacement waits for
    # it rather than take index 1 (it comes back at its own index).
    assert all(r.index != 0 for r in p.replicas)
    assert p.replicas == ()
    assert not p.deletes


def test_a_gap_below_a_healthy_slice_is_never_compacted() -> None:
    # Slice 5 runs work; moving it to index 1 would kill that work for a cosmetic gain.
    pods = slice_pods(0, "workers-aaaaa") + slice_pods(5, "workers-fffff")
    for switches in (STATIC, AUTOSCALED):
        p = plan(group(replicas=2), pods, switches)
        assert not p.deletes and not p.replicas


def test_after_workers_to_delete_frees_a_low_index_the_survivor_keeps_its_own() -> None:
    pods = slice_pods(0, "workers-aaaaa") + slice_pods(1, "workers-bbbbb")
    spec = group(replicas=1, scaleStrategy={"workersToDelete": ["workers-aaaaa-h2"]})
    for switches in (STATIC, AUTOSCALED):
        p = plan(spec, pods, switches)
        assert {n.split("-h")[0] for n in deleted(p)} == {"workers-aaaaa"}
        assert not p.replicas
        # Once slice 0 is gone, slice 1 stays where it is: nothing is created or deleted.
        p = plan(spec, slice_pods(1, "workers-bbbbb"), switches)
        assert not p.deletes and not p.replicas


def test_a_new_slice_fills_the_lowest_free_index_below_a_survivor() -> None:
    pods = slice_pods(1, "workers-bbbbb")
    for switches in (STATIC, AUTOSCALED):
        p = plan(group(replicas=2), pods, switches)
        assert [(r.index, r.reason) for r in p.replicas] == [(0, CreateReason.SCALE_UP)]


def test_two_complete_replicas_sharing_an_index_keep_the_older() -> None:
    pods = slice_pods(0, "workers-aaaaa", created=5) + slice_pods(0, "workers-bbbbb", created=1)
    d = deleted(plan(group(replicas=2), pods))
    assert {n.split("-h")[0] for n in d} == {"workers-aaaaa"}
    assert set(d.values()) == {DeleteReason.DUPLICATE_REPLICA_INDEX}


def test_colliding_replica_names_are_redrawn() -> None:
    pods = slice_pods(0, "workers-aaaaa")
    draws = iter(["aaaaa", "aaaaa", "bbbbb"])
    p = plan_group(
        GroupInput(group(replicas=2), [read_pod(x) for x in pods], 2, STATIC, lambda: next(draws))
    )
    assert [r.name for r in p.replicas] == ["workers-bbbbb"]


def test_suspend_removes_every_pod_and_creates_none() -> None:
    pods = [*slice_pods(0, "workers-aaaaa"), make_pod("loose")]
    p = plan_group(
        GroupInput(
            group(),
            [read_pod(x) for x in pods],
            0,
            STATIC,
            suffixes(),
            stop=DeleteReason.GROUP_SUSPENDED,
        )
    )
    assert set(deleted(p)) == {x["metadata"]["name"] for x in pods}
    assert set(deleted(p).values()) == {DeleteReason.GROUP_SUSPENDED}
    assert not p.replicas


def test_single_host_refills_the_deleted_index() -> None:
    pods = [make_pod(f"w{i}", replica_index=i) for i in (0, 2)]
    p = plan(group(hosts=1, replicas=3), pods)
    assert [(r.index, r.name, r.hosts) for r in p.replicas] == [(1, None, (None,))]


def test_single_host_duplicate_index_keeps_the_older_pod() -> None:
    pods = [make_pod("a", replica_index=0, created=2), make_pod("b", replica_index=0, created=1)]
    d = deleted(plan(group(hosts=1, replicas=2), pods))
    assert d == {"a": DeleteReason.DUPLICATE_REPLICA_INDEX}


def test_gate_off_counts_pods_and_replaces_failed_ones_singly() -> None:
    switches = GroupSwitches(scale_down=True, multi_host_indexing=False)
    pods = [make_pod(f"p{i}", state="failed" if i == 0 else "ready") for i in range(4)]
    p = plan(group(hosts=2, replicas=2), pods, switches)
    assert deleted(p) == {"p0": DeleteReason.POD_FAILED}
    assert [(r.index, r.hosts) for r in p.replicas] == [(None, (None,))]


def test_a_broken_slice_waits_for_its_own_index_held_by_terminating_pods() -> None:
    pods = slice_pods(0, "workers-aaaaa") + slice_pods(
        1, "workers-bbbbb", states={h: "terminating" for h in range(4)}, created=100
    )
    waiting = GroupSwitches(scale_down=True, stuck_before="2026-01-01T00:00:00Z")
    assert plan(group(), pods, waiting).replicas == ()


def test_a_broken_slice_stops_waiting_for_pods_stuck_terminating() -> None:
    pods = slice_pods(0, "workers-aaaaa") + slice_pods(
        1, "workers-bbbbb", states={h: "terminating" for h in range(4)}, created=100
    )
    # Their deletion deadline (2026-01-01T00:01:41Z) is long before `stuck_before`.
    stuck = GroupSwitches(scale_down=True, stuck_before="2026-01-02T00:00:00Z")
    assert [r.index for r in plan(group(), pods, stuck).replicas] == [2]


def test_an_absurd_replica_count_plans_a_bounded_batch() -> None:
    from raycluster_operator.planning.group_plan import MAX_NEW_PODS_PER_PASS

    for switches in (STATIC, AUTOSCALED):
        p = plan(group(hosts=4, replicas=2**31 - 1), [], switches)
        assert len(p.replicas) == MAX_NEW_PODS_PER_PASS // 4
        assert [r.index for r in p.replicas[:3]] == [0, 1, 2]
