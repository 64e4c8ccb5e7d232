from __future__ import annotations

from raycluster_operator.controller.raycluster.mergepatch import merge_patch


def test_equal_documents_need_no_patch() -> None:
    doc = {"state": "ready", "head": {"podIP": "1.2.3.4"}, "conditions": [{"type": "A"}]}
    assert merge_patch(doc, dict(doc)) == {}


def test_changed_added_and_removed_keys() -> None:
    current = {"state": "ready", "head": {"podIP": "1", "serviceIP": "2"}, "old": 1}
    desired = {"state": "suspended", "head": {"podIP": "1"}, "new": [1]}
    assert merge_patch(current, desired) == {
        "state": "suspended",
        "head": {"serviceIP": None},
        "old": None,
        "new": [1],
    }


def test_lists_are_replaced_whole() -> None:
    assert merge_patch({"c": [1, 2]}, {"c": [1]}) == {"c": [1]}
