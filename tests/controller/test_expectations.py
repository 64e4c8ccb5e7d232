from __future__ import annotations

from raycluster_operator.controller.raycluster.expectations import Expectations


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def lookup_in(cache: dict[str, bool]):  # name -> terminating
    return cache.get


def test_no_expectations_means_satisfied() -> None:
    assert Expectations().satisfied("ns/c", lookup_in({}))


def test_creates_are_satisfied_once_every_name_is_in_the_cache() -> None:
    exp = Expectations(clock=FakeClock())
    exp.expect("ns/c", creates=["p1", "p2"])
    cache: dict[str, bool] = {"p1": False}
    assert not exp.satisfied("ns/c", cache.get)
    cache["p2"] = False
    assert exp.satisfied("ns/c", cache.get)


def test_deletes_are_satisfied_when_pods_are_gone_or_terminating() -> None:
    exp = Expectations(clock=FakeClock())
    exp.expect("ns/c", deletes=["p1", "p2"])
    cache = {"p1": False, "p2": False}
    assert not exp.satisfied("ns/c", cache.get)
    cache["p1"] = True
    del cache["p2"]
    assert exp.satisfied("ns/c", cache.get)


def test_an_event_seen_before_the_expectation_still_counts() -> None:
    exp = Expectations(clock=FakeClock())
    cache = {"p1": False}  # the watch delivered the pod before the create call returned
    exp.expect("ns/c", creates=["p1"])
    assert exp.satisfied("ns/c", cache.get)


def test_a_lost_event_cannot_wedge_a_cluster_forever() -> None:
    clock = FakeClock()
    exp = Expectations(timeout=60, clock=clock)
    exp.expect("ns/c", creates=["never-seen"])
    assert not exp.satisfied("ns/c", lookup_in({}))
    assert exp.remaining("ns/c") == 60
    clock.now = 61
    assert exp.satisfied("ns/c", lookup_in({}))


def test_clusters_are_independent() -> None:
    exp = Expectations(clock=FakeClock())
    exp.expect("ns/a", creates=["x"])
    assert exp.satisfied("ns/b", lookup_in({}))
    assert not exp.satisfied("ns/a", lookup_in({}))
    exp.forget("ns/a")
    assert exp.satisfied("ns/a", lookup_in({}))


def test_a_pod_created_and_deleted_between_two_passes_still_counts() -> None:
    exp = Expectations(clock=FakeClock())
    exp.expect("ns/c", creates=["p1"], deletes=["p2"])
    exp.observe("ns/c", "p1", terminating_or_gone=False)  # ADDED, then removed by a user
    exp.observe("ns/c", "p2", terminating_or_gone=True)
    assert exp.satisfied("ns/c", lookup_in({}))


def test_a_vouched_object_is_present_until_the_cache_speaks_or_the_deadline_passes() -> None:
    now = [0.0]
    exp = Expectations(timeout=10.0, clock=lambda: now[0])
    exp.vouch("ns/c", [("Role", "c"), ("ServiceAccount", "c")])
    assert exp.vouched("ns/c") == {("Role", "c"), ("ServiceAccount", "c")}
    exp.observe_object("ns/c", ("Role", "c"))  # seen (or seen gone): the cache is the truth
    assert exp.vouched("ns/c") == {("ServiceAccount", "c")}
    assert exp.satisfied("ns/c", lambda _: None)  # vouches never hold a cluster back
    now[0] = 10.0
    assert exp.vouched("ns/c") == frozenset()


def test_forgetting_a_cluster_drops_its_vouches() -> None:
    exp = Expectations()
    exp.vouch("ns/c", [("Service", "c-head-svc")])
    exp.forget("ns/c")
    assert exp.vouched("ns/c") == frozenset()
