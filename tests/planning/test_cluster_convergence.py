"""Property: any cluster and any pod set converge, touching nothing outside the cluster.

Beyond the per-group property, this one mixes groups, removed groups, heads in any state,
suspended groups, other clusters' and namespaces' pods, and checks the controller's view:
an empty plan at the end whose status is identical when planned again later.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from raycluster_operator.api import labels
from raycluster_operator.api.models import RayClusterStatus
from raycluster_operator.planning.desired import desired_slices

from .cluster import Loop, cluster, worker_group
from .world import World, make_pod

STATES = st.sampled_from(["ready", "ready", "pending", "failed", "crashed", "terminating"])
#: Not terminating: the simulator lets terminating pods vanish, whoever they belong to.
FOREIGN_STATES = st.sampled_from(["ready", "pending", "failed", "crashed"])
GROUPS = ("alpha", "beta")


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    groups = []
    for name in GROUPS[: draw(st.integers(1, 2))]:
        fields: dict[str, Any] = {
            "numOfHosts": draw(st.integers(1, 3)),
            "replicas": draw(st.integers(0, 3)),
        }
        if draw(st.integers(0, 5)) == 0:
            fields["suspend"] = True
        groups.append(worker_group(name, **fields))
    spec: dict[str, Any] = {"enableInTreeAutoscaling": draw(st.booleans())}
    options = {
        "multi_host_indexing": draw(st.booleans()),
        "random_pod_delete": draw(st.booleans()),
        "stuck": draw(st.booleans()),
    }
    pods: list[dict[str, Any]] = []
    for i in range(draw(st.integers(0, 14))):
        group = draw(st.sampled_from([*GROUPS, "removed"]))
        index = draw(st.integers(0, 3))
        pods.append(
            make_pod(
                f"p{i}",
                group=group,
                replica_index=index if draw(st.integers(0, 5)) else None,
                replica_name=f"{group}-r{index}{draw(st.sampled_from(['', 'x']))}",
                host_index=draw(st.integers(0, 3)),
                state=draw(STATES),
                created=draw(st.integers(0, 30)),
            )
        )
    for i in range(draw(st.integers(0, 2))):
        pods.append(
            make_pod(f"head{i}", group=labels.HEAD_GROUP, node_type="head", state=draw(STATES))
        )
    foreign = [
        make_pod("x-cluster", cluster="other", group="alpha", state=draw(FOREIGN_STATES)),
        make_pod("x-namespace", namespace="other", group="alpha", state=draw(FOREIGN_STATES)),
    ]
    return groups, spec, [*pods, *foreign], options


Scenario = tuple[list[dict[str, Any]], dict[str, Any], list[dict[str, Any]], dict[str, bool]]


@settings(max_examples=100, deadline=None)
@given(scenarios())
def test_clusters_converge_and_never_touch_foreign_pods(
    scenario: Scenario,
) -> None:
    groups, spec, pods, options = scenario
    foreign = {
        p["metadata"]["name"]: copy.deepcopy(p)
        for p in pods
        if p["metadata"]["name"].startswith("x-")
    }
    loop = Loop(cluster(*groups, **spec), World.of(pods), **options)
    settled = loop.settle(max_steps=10)

    for name, pod in foreign.items():
        assert loop.world.pods[name] == pod
    mine = [p for n, p in loop.world.pods.items() if n not in foreign]
    heads = [p for p in mine if p["metadata"]["labels"][labels.NODE_TYPE] == "head"]
    assert len(heads) == 1
    by_group: dict[str, dict[int, list[dict[str, str]]]] = defaultdict(lambda: defaultdict(list))
    unindexed: dict[str, int] = defaultdict(int)
    for pod in mine:
        lab = pod["metadata"]["labels"]
        if lab[labels.NODE_TYPE] == "worker":
            assert lab[labels.GROUP] != "removed"
            if labels.REPLICA_INDEX in lab:
                by_group[lab[labels.GROUP]][int(lab[labels.REPLICA_INDEX])].append(lab)
            else:
                unindexed[lab[labels.GROUP]] += 1
    scale_down = not spec["enableInTreeAutoscaling"] or options["random_pod_delete"]
    for group in loop.cluster.spec.worker_group_specs:
        found = by_group.get(group.group_name, {})
        want = desired_slices(group)
        if not options["multi_host_indexing"] and group.num_of_hosts == 1:
            # Gate off, single host: KubeRay's unindexed pods, counted not indexed.
            count = unindexed[group.group_name] + sum(len(m) for m in found.values())
            assert count == want if scale_down else count >= want
            continue
        assert unindexed[group.group_name] == 0
        if scale_down:
            assert len(found) == want
        else:
            assert len(found) >= want
        for members in found.values():
            if group.num_of_hosts > 1:
                assert len({m[labels.REPLICA_NAME] for m in members}) == 1
                assert sorted(int(m[labels.HOST_INDEX]) for m in members) == list(
                    range(group.num_of_hosts)
                )
            else:
                assert len(members) == 1

    loop.cluster.status = RayClusterStatus.model_validate(settled.status)
    again = loop.plan()
    assert again.is_empty and not again.events
    assert again.status == settled.status
