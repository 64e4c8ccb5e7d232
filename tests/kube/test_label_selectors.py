"""kubefacts.selectors: a structured label selector read as policy/v1 reads a budget's."""

from __future__ import annotations

import pytest

from kubefacts.selectors import selects

POD = {"ray.io/cluster": "demo", "ray.io/node-type": "worker"}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        (None, False),  # a null selector selects nothing
        ({}, True),  # an empty one, every pod
        ({"matchLabels": {"ray.io/cluster": "demo"}}, True),
        ({"matchLabels": {"ray.io/cluster": "other"}}, False),
        (
            {
                "matchExpressions": [
                    {"key": "ray.io/node-type", "operator": "In", "values": ["head"]}
                ]
            },
            False,
        ),
        ({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["x"]}]}, True),
        ({"matchExpressions": [{"key": "team", "operator": "Exists"}]}, False),
        ({"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}, True),
        (
            {
                "matchLabels": {"ray.io/cluster": "demo"},
                "matchExpressions": [
                    {"key": "ray.io/node-type", "operator": "NotIn", "values": ["worker"]}
                ],
            },
            False,
        ),
    ],
)
def test_selects_as_policy_v1_reads_a_budget(selector: dict | None, expected: bool) -> None:
    assert selects(selector, POD) is expected
