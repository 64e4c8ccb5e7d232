"""The planner's presence question costs what it asks, not the namespace's size (issue 26)."""

from __future__ import annotations

from typing import Any

from raycluster_operator.controller.raycluster.present import Present
from raycluster_operator.controller.runtime.store import Store, StoreView


class CountingStore(Store):
    """A store that counts the objects any read hands out."""

    def __init__(self) -> None:
        super().__init__()
        self.read = 0

    def get(self, key: str) -> Any:
        found = super().get(key)
        self.read += found is not None
        return found

    def values(self) -> list[Any]:
        out = super().values()
        self.read += len(out)
        return out


def service(name: str, ns: str = "ns") -> dict[str, Any]:
    return {"kind": "Service", "metadata": {"name": name, "namespace": ns}}


def present_in(store: Store, vouched: frozenset[tuple[str, str]] = frozenset()) -> Present:
    return Present("ns", {"Service": StoreView([store])}, vouched)


def test_answers_from_the_cache_the_vouched_and_nothing_else() -> None:
    store = Store()
    store.upsert(service("a-head-svc"))
    store.upsert(service("b-head-svc", ns="other"))
    present = present_in(store, frozenset({("Role", "a")}))
    assert ("Service", "a-head-svc") in present
    assert ("Role", "a") in present  # created by us, not cached yet
    assert ("Service", "b-head-svc") not in present  # another namespace
    assert ("ServiceAccount", "a-head-svc") not in present  # a kind not watched
    assert "a-head-svc" not in present


def test_a_question_reads_one_object_however_many_share_the_namespace() -> None:
    reads = []
    for size in (10, 1000):
        store = CountingStore()
        for i in range(size):
            store.upsert(service(f"c{i}-head-svc"))
        present = present_in(store)
        assert ("Service", "c3-head-svc") in present
        assert ("Service", "missing") not in present
        reads.append(store.read)
    assert reads == [1, 1]
