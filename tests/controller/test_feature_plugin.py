"""A lifecycle feature is a plug-in (docs/design.md §4, "Lifecycle features"): a toy feature
defined here, and added to ``lifecycle.FEATURES`` by this module alone, gets its watch (an
informer whose changes name the cluster of their label), its RBAC in both installs, its
status condition and group field, and that field's schema in every CRD, with no source file
touched."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from fake_kube import FakeKube
from test_install import grants

from raycluster_operator.controller import crds, install
from raycluster_operator.controller.raycluster.sources import Change, SourceOptions, Sources
from raycluster_operator.planning import lifecycle
from raycluster_operator.planning.feature import Feature, Route, Rule, Watch
from raycluster_operator.planning.reasons import Condition
from raycluster_operator.planning.turn import ClusterTurn
from tests.planning.cluster import Loop, cluster, worker_group


class Tickets(Feature):
    """Counts the cluster's Tickets (a kind of someone else's) and says so in the status."""

    rule = "99"
    watches = (Watch("example.com", "v1", "Ticket", "tickets", ("create",)),)
    rules = (Rule("example.com", "tickets/status", ("patch",)),)
    fields = {"openTickets": {"description": "Open tickets of the group.", "type": "integer"}}

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


def group_fields(status: Mapping[str, Any]) -> Mapping[str, Any]:
    return status["properties"]["workerGroups"]["items"]["properties"]


def test_the_toy_feature_gets_its_status_field_in_every_crd() -> None:
    def status(crd: Mapping[str, Any]) -> Mapping[str, Any]:
        return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]

    wanted = Tickets.fields["openTickets"]
    cluster = status(crds.crd_manifest())
    job = status(crds.rayjob_crd_manifest())["properties"]["rayClusterStatus"]
    service = status(crds.rayservice_crd_manifest())["properties"]["activeServiceStatus"]
    service = service["properties"]["rayClusterStatus"]
    assert [group_fields(s)["openTickets"] for s in (cluster, job, service)] == [wanted] * 3
    # The features of the source tree declare theirs the same way.
    assert {"backoff", "quotaWaiting"} <= group_fields(cluster).keys()


class Beacons(Feature):
    """Plans from a cluster-scoped kind it routes like Nodes (by the pods bound to them)."""

    rule = "99"
    watches = (Watch("example.com", "v1", "Beacon", "beacons", namespaced=False, route=Route.NODE),)

    def __init__(self, turn: ClusterTurn) -> None:
        return None


def test_a_watch_routed_by_hand_gets_no_label_selected_informer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The sources route from what a feature declares: only ``Route.LABEL`` kinds get
    informers of their own, so Nodes, budgets, quotas and domains keep the caches made for
    them, and so does any kind declared with their routes."""
    monkeypatch.setattr(lifecycle, "FEATURES", (*lifecycle.FEATURES, Beacons))
    src = Sources(FakeKube(), SourceOptions(namespaces=("ns",)))  # type: ignore[arg-type]
    assert set(src.watched) == {"Ticket"}
