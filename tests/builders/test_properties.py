"""Properties of every pod we build, over random (valid) names, indices and slice sizes."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from raycluster_operator.api.models import load_cluster
from raycluster_operator.builders import build_head_pod

from .conftest import cluster_dict, env_of, tpu_worker_group, worker_pod

LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

cluster_names = st.from_regex(r"\A[a-z]([-a-z0-9]{0,61}[a-z0-9])?\Z")
group_names = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")


def assert_valid_labels(pod: dict[str, Any]) -> None:
    for key, value in pod["metadata"]["labels"].items():
        assert len(value) <= 63 and LABEL_VALUE.match(value), (key, value)


@settings(max_examples=60, deadline=None)
@given(cluster_names, group_names, st.integers(1, 8), st.integers(0, 5000))
def test_every_host_of_a_slice_agrees_and_names_fit(
    cluster_name: str, group: str, hosts: int, replica: int
) -> None:
    obj = cluster_dict()
    obj["metadata"]["name"] = cluster_name
    obj["spec"]["workerGroupSpecs"] = [tpu_worker_group(groupName=group, numOfHosts=hosts)]
    del obj["spec"]["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"]
    cluster = load_cluster(obj)
    (g,) = cluster.spec.worker_group_specs
    multi = hosts > 1
    pods = [
        worker_pod(cluster, g, replica=replica, host=h if multi else None) for h in range(hosts)
    ]
    assert_valid_labels(build_head_pod(cluster))
    for h, pod in enumerate(pods):
        assert_valid_labels(pod)
        env = env_of(pod)
        assert env["TPU_WORKER_ID"] == str(h)
        assert len(pod["metadata"]["generateName"]) <= 63 - 5
        if multi:
            assert DNS_LABEL.match(pod["spec"]["hostname"])
            assert len(pod["spec"]["hostname"]) <= 63
            assert DNS_LABEL.match(pod["spec"]["subdomain"])
    if multi:
        listed = {env_of(p)["TPU_WORKER_HOSTNAMES"] for p in pods}
        assert len(listed) == 1
        actual = [f"{p['spec']['hostname']}.{p['spec']['subdomain']}" for p in pods]
        assert listed.pop().split(",") == actual
        assert len(set(actual)) == hosts
        assert len({env_of(p)["TPU_NAME"] for p in pods}) == 1
