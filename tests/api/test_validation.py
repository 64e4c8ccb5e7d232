"""Validation: every bad input is reported at its precise KubeRay field path."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from raycluster_operator.api.models import INT32_MAX
from raycluster_operator.api.problems import Problem
from raycluster_operator.api.validation import field_path, parse_cluster, validate_structure


def container(name: str = "ray") -> dict[str, Any]:
    return {"name": name, "image": "rayproject/ray:2.60.0"}


def valid() -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "demo", "namespace": "ml"},
        "spec": {
            "headGroupSpec": {"template": {"spec": {"containers": [container("ray-head")]}}},
            "workerGroupSpecs": [
                {
                    "groupName": "cpu",
                    "replicas": 1,
                    "template": {"spec": {"containers": [container()]}},
                },
                {
                    "groupName": "tpu",
                    "replicas": 2,
                    "minReplicas": 0,
                    "maxReplicas": 4,
                    "numOfHosts": 4,
                    "template": {"spec": {"containers": [container()]}},
                },
            ],
        },
    }


def problems_of(obj: Any) -> list[Problem]:
    cluster, problems = parse_cluster(obj)
    if cluster is not None:
        problems = problems + validate_structure(cluster)
    return problems


def paths_of(obj: Any) -> set[str]:
    return {p.path for p in problems_of(obj)}


def test_a_valid_cluster_has_no_problems() -> None:
    assert problems_of(valid()) == []


def test_unknown_fields_are_accepted() -> None:
    obj = valid()
    obj["spec"]["someFutureField"] = {"x": 1}
    obj["spec"]["workerGroupSpecs"][0]["futureKnob"] = True
    assert problems_of(obj) == []


@pytest.mark.parametrize("obj", [None, [], "RayCluster", 3])
def test_non_objects_are_a_problem_not_an_exception(obj: Any) -> None:
    cluster, problems = parse_cluster(obj)
    assert cluster is None
    assert len(problems) == 1 and problems[0].path == ""
    assert "object" in problems[0].message


def test_type_errors_name_the_kuberay_path() -> None:
    obj = valid()
    obj["spec"]["workerGroupSpecs"][1]["numOfHosts"] = "four"
    obj["spec"]["headGroupSpec"]["template"] = []
    cluster, problems = parse_cluster(obj)
    assert cluster is None
    assert {(p.path, p.message) for p in problems} == {
        ("spec.workerGroupSpecs[1].numOfHosts", "must be an integer"),
        ("spec.headGroupSpec.template", "must be an object"),
    }


def test_missing_required_fields() -> None:
    obj = valid()
    del obj["spec"]["headGroupSpec"]
    del obj["spec"]["workerGroupSpecs"][0]["groupName"]
    assert paths_of(obj) == {"spec.headGroupSpec", "spec.workerGroupSpecs[0].groupName"}


def test_wrong_api_version_and_kind() -> None:
    obj = valid()
    obj["apiVersion"] = "ray.io/v1alpha1"
    obj["kind"] = "RayJob"
    assert paths_of(obj) == {"apiVersion", "kind"}


def mutate(path: list[str | int], value: Any) -> dict[str, Any]:
    obj = valid()
    node: Any = obj
    for part in path[:-1]:
        node = node[part]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return obj


W1 = ["spec", "workerGroupSpecs", 1]


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ([*W1, "numOfHosts"], 0, "spec.workerGroupSpecs[1].numOfHosts"),
        ([*W1, "numOfHosts"], -3, "spec.workerGroupSpecs[1].numOfHosts"),
        ([*W1, "numOfHosts"], INT32_MAX + 1, "spec.workerGroupSpecs[1].numOfHosts"),
        ([*W1, "replicas"], -1, "spec.workerGroupSpecs[1].replicas"),
        ([*W1, "minReplicas"], -1, "spec.workerGroupSpecs[1].minReplicas"),
        ([*W1, "maxReplicas"], -1, "spec.workerGroupSpecs[1].maxReplicas"),
        ([*W1, "replicas"], INT32_MAX + 1, "spec.workerGroupSpecs[1].replicas"),
        ([*W1, "maxReplicas"], 2**40, "spec.workerGroupSpecs[1].maxReplicas"),
        ([*W1, "minReplicas"], 5, "spec.workerGroupSpecs[1].minReplicas"),
        ([*W1, "groupName"], "TPU", "spec.workerGroupSpecs[1].groupName"),
        ([*W1, "groupName"], "tpu_v6e", "spec.workerGroupSpecs[1].groupName"),
        ([*W1, "groupName"], "-tpu", "spec.workerGroupSpecs[1].groupName"),
        ([*W1, "groupName"], "", "spec.workerGroupSpecs[1].groupName"),
        ([*W1, "groupName"], "g" * 64, "spec.workerGroupSpecs[1].groupName"),
        (["metadata", "name"], "c" * 64, "metadata.name"),
        (["metadata", "name"], "Demo", "metadata.name"),
        (["metadata", "name"], "1demo", "metadata.name"),
        (["metadata", "name"], "demo.x", "metadata.name"),
        (["metadata", "name"], KeyError, "metadata.name"),
        (
            [*W1, "template", "spec", "containers"],
            [],
            "spec.workerGroupSpecs[1].template.spec.containers",
        ),
        (
            [*W1, "template", "spec", "containers"],
            KeyError,
            "spec.workerGroupSpecs[1].template.spec.containers",
        ),
        ([*W1, "template", "spec"], KeyError, "spec.workerGroupSpecs[1].template.spec"),
        (
            ["spec", "headGroupSpec", "template", "spec", "containers"],
            [],
            "spec.headGroupSpec.template.spec.containers",
        ),
        (
            ["spec", "headGroupSpec", "template", "spec", "containers"],
            [{"name": "ray-head"}],
            "spec.headGroupSpec.template.spec.containers[0].image",
        ),
        (
            [*W1, "template", "spec", "containers"],
            [container(), container()],
            "spec.workerGroupSpecs[1].template.spec.containers[1].name",
        ),
        (
            [*W1, "template", "spec", "hostname"],
            "mine",
            "spec.workerGroupSpecs[1].template.spec.hostname",
        ),
        (
            [*W1, "template", "spec", "subdomain"],
            "mine",
            "spec.workerGroupSpecs[1].template.spec.subdomain",
        ),
        ([*W1, "idleTimeoutSeconds"], -5, "spec.workerGroupSpecs[1].idleTimeoutSeconds"),
    ],
)
def test_each_bad_value_is_reported_at_its_path(
    path: list[str | int], value: Any, expected: str
) -> None:
    problems = problems_of(mutate(path, value))
    assert [p.path for p in problems] == [expected], problems
    assert all(p.message for p in problems)


def test_min_greater_than_max_says_both_values() -> None:
    (problem,) = problems_of(mutate([*W1, "minReplicas"], 5))
    assert "5" in problem.message and "4" in problem.message


def test_duplicate_group_names_are_reported_for_each_group() -> None:
    problems = problems_of(mutate([*W1, "groupName"], "cpu"))
    assert {p.path for p in problems} == {
        "spec.workerGroupSpecs[0].groupName",
        "spec.workerGroupSpecs[1].groupName",
    }


def test_every_problem_is_reported_at_once() -> None:
    obj = valid()
    obj["metadata"]["name"] = "Bad_Name"
    g = obj["spec"]["workerGroupSpecs"][1]
    g.update(numOfHosts=0, replicas=-1, minReplicas=9, maxReplicas=2)
    g["template"]["spec"]["containers"] = []
    assert paths_of(obj) == {
        "metadata.name",
        "spec.workerGroupSpecs[1].numOfHosts",
        "spec.workerGroupSpecs[1].replicas",
        "spec.workerGroupSpecs[1].minReplicas",
        "spec.workerGroupSpecs[1].template.spec.containers",
    }


def test_hostname_on_a_single_host_group_is_the_users_business() -> None:
    assert (
        problems_of(mutate(["spec", "workerGroupSpecs", 0, "template", "spec", "hostname"], "x"))
        == []
    )


def test_a_foreign_template_namespace_is_not_a_problem() -> None:
    # KubeRay accepts it and forces the cluster's namespace; so do the builders.
    obj = mutate([*W1, "template", "metadata"], {"namespace": "elsewhere"})
    assert problems_of(obj) == []


def test_long_names_that_are_only_long_once_combined_are_fine() -> None:
    obj = valid()
    obj["metadata"]["name"] = "c" * 63
    obj["spec"]["workerGroupSpecs"][1]["groupName"] = "g" * 63
    assert problems_of(obj) == []


def test_parse_does_not_mutate_its_input() -> None:
    obj = valid()
    before = copy.deepcopy(obj)
    parse_cluster(obj)
    assert obj == before


@pytest.mark.parametrize(
    ("loc", "path"),
    [
        (("spec", "workerGroupSpecs", 1, "numOfHosts"), "spec.workerGroupSpecs[1].numOfHosts"),
        (
            ("spec", "headGroupSpec", "rayStartParams", "num-cpus"),
            "spec.headGroupSpec.rayStartParams['num-cpus']",
        ),
        ((), ""),
    ],
)
def test_field_path(loc: tuple[str | int, ...], path: str) -> None:
    assert field_path(loc) == path


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (
            [*W1, "template", "spec", "volumes"],
            {},
            "spec.workerGroupSpecs[1].template.spec.volumes",
        ),
        (
            ["spec", "headGroupSpec", "template", "spec", "containers", 0, "env"],
            {"A": "1"},
            "spec.headGroupSpec.template.spec.containers[0].env",
        ),
        (
            [*W1, "template", "spec", "containers", 0, "env"],
            ["A=1"],
            "spec.workerGroupSpecs[1].template.spec.containers[0].env[0]",
        ),
        (
            [*W1, "template", "spec", "containers", 0, "command"],
            "ray start",
            "spec.workerGroupSpecs[1].template.spec.containers[0].command",
        ),
        (
            [*W1, "template", "spec", "containers", 0, "args"],
            ["--x", 3],
            "spec.workerGroupSpecs[1].template.spec.containers[0].args[1]",
        ),
        (
            [*W1, "template", "spec", "affinity"],
            [],
            "spec.workerGroupSpecs[1].template.spec.affinity",
        ),
    ],
)
def test_template_fields_the_operator_extends_must_have_their_kubernetes_shape(
    path: list[str | int], value: Any, expected: str
) -> None:
    assert [p.path for p in problems_of(mutate(path, value))] == [expected]


def test_null_template_fields_are_absent_fields() -> None:
    obj = mutate([*W1, "template", "spec", "volumes"], None)
    obj["spec"]["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]["env"] = None
    assert problems_of(obj) == []


def test_status_with_our_slice_counts_round_trips() -> None:
    from raycluster_operator.api.models import dump_cluster

    obj = valid()
    obj["status"] = {
        "state": "ready",
        "desiredWorkerSlices": 2,
        "readyWorkerSlices": 1,
        "workerGroups": [
            {
                "groupName": "tpu",
                "numOfHosts": 4,
                "desiredSlices": 2,
                "readySlices": 1,
                "brokenSlices": 0,
                "desiredPods": 8,
                "readyPods": 4,
                "future": 1,
            }
        ],
        "futureStatus": "x",
    }
    cluster, problems = parse_cluster(obj)
    assert cluster is not None and not problems
    assert cluster.status is not None and cluster.status.worker_groups is not None
    assert cluster.status.worker_groups[0].ready_slices == 1
    assert dump_cluster(cluster) == obj


def test_a_type_error_does_not_hide_the_other_problems() -> None:
    """issue 38 item 4: maxReplicas "x" and numOfHosts -1 are both listed, in one answer."""
    obj = valid()
    obj["spec"]["workerGroupSpecs"][0]["maxReplicas"] = "x"
    obj["spec"]["workerGroupSpecs"][1]["numOfHosts"] = -1
    cluster, problems = parse_cluster(obj)
    assert cluster is None
    assert [p.path for p in problems] == [
        "spec.workerGroupSpecs[0].maxReplicas",
        "spec.workerGroupSpecs[1].numOfHosts",
    ]
    assert problems[0].message == "must be an integer"
    assert "at least 1" in problems[1].message


def test_a_wrong_required_field_still_reports_what_can_be_read() -> None:
    """A required field cannot be dropped to read the rest: its problem alone is certain."""
    obj = valid()
    obj["spec"]["workerGroupSpecs"][0]["groupName"] = 5
    obj["spec"]["workerGroupSpecs"][1]["numOfHosts"] = -1
    cluster, problems = parse_cluster(obj)
    assert cluster is None
    assert [p.path for p in problems] == ["spec.workerGroupSpecs[0].groupName"]
