"""Replaying recorded plans through two planners: a pytest plugin and a comparison.

Record every ``plan_cluster`` and ``plan_pass`` answer a test run makes, once with the old
planner's source and once with the new, then compare (0 differences is the bar for a change
of the planner's structure that must not change what it decides)::

    PLAN_RECORD=/tmp/old.jsonl PYTHONPATH=<old>/src .venv/bin/python -m pytest \\
        -p tests.harness.plan_record -p no:cacheprovider --hypothesis-seed=0 tests/planning
    PLAN_RECORD=/tmp/new.jsonl PYTHONPATH=src .venv/bin/python -m pytest ... (the same)
    .venv/bin/python -m tests.harness.plan_record /tmp/old.jsonl /tmp/new.jsonl

Each line is one plan of one test, every field as plain data; plans are compared per test, in
the order the test made them (``--hypothesis-seed`` makes the property tests draw the same
examples in both runs).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import sys
from collections import defaultdict
from typing import Any

#: What is compared of a ``plan_cluster`` answer and of a ``plan_pass`` answer.
CLUSTER_FIELDS = (
    "creates",
    "deletes",
    "services",
    "extra_objects",
    "object_deletes",
    "events",
    "status",
    "problems",
    "missing_services",
    "tallies",
    "transitions",
    "annotations",
    "requeue_after",
    "is_empty",
)
PASS_FIELDS = (
    "objects",
    "object_deletes",
    "deletes",
    "creates",
    "release_finalizer",
    "events",
    "status",
    "note",
    "annotations",
    "requeue_after",
)


def plain(value: Any) -> Any:
    """``value`` as JSON data: dataclasses by field, enums by name, sets sorted."""
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if hasattr(value, "items") and not isinstance(value, (str, bytes)):
        return {str(plain(k)): plain(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted((plain(i) for i in value), key=repr)
    if isinstance(value, (list, tuple)):
        return [plain(i) for i in value]
    return value


def _write(kind: str, plan: Any, fields: tuple[str, ...], **extra: Any) -> None:
    test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0]
    record = {"test": test, "kind": kind, **{f: plain(getattr(plan, f)) for f in fields}}
    record.update(extra)
    with open(os.environ["PLAN_RECORD"], "a") as out:
        out.write(json.dumps(record, sort_keys=True, default=repr) + "\n")


def pytest_configure(config: Any) -> None:
    """Wrap the planner's two entry points wherever a test can import them from."""
    if not os.environ.get("PLAN_RECORD"):
        return
    import raycluster_operator.planning as planning
    import raycluster_operator.planning.cluster_plan as cluster_plan
    import raycluster_operator.planning.pass_plan as pass_plan

    cluster_original, pass_original = cluster_plan.plan_cluster, pass_plan.plan_pass

    def plan_cluster(*args: Any, **kwargs: Any) -> Any:
        plan = cluster_original(*args, **kwargs)
        _write("cluster", plan, CLUSTER_FIELDS)
        return plan

    def plan_pass(*args: Any, **kwargs: Any) -> Any:
        plan = pass_original(*args, **kwargs)
        # The metrics' tallies: ``slices`` before the one ``Writes`` value, ``tallies`` since.
        gauges = plan.slices if hasattr(plan, "slices") else plan.tallies
        _write("pass", plan, PASS_FIELDS, gauges=plain(gauges))
        return plan

    cluster_plan.plan_cluster = planning.plan_cluster = pass_plan.plan_cluster = plan_cluster  # type: ignore[assignment]
    pass_plan.plan_pass = planning.plan_pass = plan_pass  # type: ignore[assignment]


def _load(path: str) -> dict[tuple[str, str], list[dict[str, Any]]]:
    out: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    with open(path) as lines:
        for line in lines:
            record = json.loads(line)
            out[record["test"], record["kind"]].append(record)
    return out


def compare(old_path: str, new_path: str) -> int:
    """Print the plans that differ (test, kind, position, fields); answer how many."""
    old, new = _load(old_path), _load(new_path)
    differences = 0
    for key in sorted(set(old) | set(new)):
        before, after = old.get(key, []), new.get(key, [])
        if len(before) != len(after):
            print(f"{key[0]} ({key[1]}): {len(before)} plans, then {len(after)}")
            differences += 1
        for position, (a, b) in enumerate(zip(before, after, strict=False)):
            fields = sorted(f for f in a.keys() | b.keys() if a.get(f) != b.get(f))
            if fields:
                print(f"{key[0]} ({key[1]}) plan {position}: {', '.join(fields)}")
                differences += 1
    plans = sum(len(v) for v in old.values())
    tests = len({test for test, _ in old})
    print(f"{plans} plans of {tests} tests replayed: {differences} differences")
    return differences


if __name__ == "__main__":
    sys.exit(1 if compare(sys.argv[1], sys.argv[2]) else 0)
