"""A lifecycle feature is a plug-in (docs/design.md §4, "Lifecycle features"): a toy feature
defined here, and added to ``lifecycle.FEATURES`` by this module alone, gets its watch (an
informer whose changes name the cluster of their label), its RBAC in both installs, and its
status condition and group field, with no source file touched."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from fake_kube import FakeKube
from test_install import grants

from raycluster_operator.controller import install
from raycluster_operator.controller.raycluster.sources import Change, SourceOptions, Sources
from raycluster_operator.planning import lifecycle
from raycluster_operator.planning.feature import Feature, Rule, Watch
from raycluster_operator.planning.reasons import Condition
from raycluster_operator.planning.turn import ClusterTurn
from tests.planning.cluster import Loop, cluster, worker_group


class Tickets(Feature):
    """Counts the cluster's Tickets (a kind of someone else's) and says so in the status."""

    rule = "99"
    watches = (Watch("example.com", "v1", "Ticket", "tickets", ("create",)),)
    rules = (Rule("example.com", "tickets/status", ("patch",)),)

    def __init__(self, turn: ClusterTurn) -> None:
        self.open = turn.context.state.objects.get("Ticket", ())

    def conditions(self) -> Sequence[Condition]:
        return (Condition("TicketsOpen", bool(self.open), "Counted", f"{len(self.open)} open"),)

    def status(self, group: str) -> Mapping[str, Any]:
        return {"openTickets": sum(1 for t in self.open if t.get("group") == group)}


@pytest.fixture(autouse=True)
def plugged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lifecycle, "FEATURES", (*lifecycle.FEATURES, Tickets))


def test_the_toy_feature_gets_its_rbac_in_both_installs() -> None:
    wanted = {("example.com", "tickets", v) for v in ("list", "watch", "create")}
    wanted.add(("example.com", "tickets/status", "patch"))
    cluster_role = install.cluster_rbac("op")[0]
    role = install.namespaced_rbac("op", ["ray"])[0]
    assert wanted <= grants(cluster_role["rules"])
    assert wanted <= grants(role["rules"])


def test_the_toy_feature_gets_its_watch_and_a_change_names_the_cluster() -> None:
    src = Sources(FakeKube(), SourceOptions(namespaces=("ns",)))  # type: ignore[arg-type]
    seen: list[Change] = []
    src.subscribe(seen.append)
    (informer,) = src.watched["Ticket"]
    assert informer in src.informers and informer.label_selector == "ray.io/cluster"
    ticket = {"metadata": {"name": "t1", "namespace": "ns", "labels": {"ray.io/cluster": "c"}}}
    informer.apply("ADDED", ticket)
    assert seen == [Change("ns/c", "Ticket", "t1", False)]
    assert [
        t["metadata"]["name"] for t in src.caches.watched["Ticket"].by_index("cluster", "ns/c")
    ] == ["t1"]


def test_the_toy_feature_gets_its_condition_and_group_field() -> None:
    loop = Loop(cluster(worker_group(replicas=1)), objects={"Ticket": [{"group": "workers"}]})
    status = loop.plan().status
    assert [g["openTickets"] for g in status["workerGroups"]] == [1]
    (condition,) = [c for c in status["conditions"] if c["type"] == "TicketsOpen"]
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "True",
        "Counted",
        "1 open",
    )
