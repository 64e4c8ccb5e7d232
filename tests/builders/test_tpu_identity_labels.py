"""A host's Ray TPU identity is its own, whatever labels its group carries (design rule 3.4a).

Ray's slice reservation (`ray.util.tpu.reserve_tpu_slice`) picks a slice by the head's labels
`ray.io/tpu-worker-id=0` + `ray.io/tpu-pod-type`, then gang-schedules on
`ray.io/tpu-slice-name`. A group `labels` entry (KubeRay >= 1.4; what a user adds so that
KubeRay's autoscaler config shows those labels) or a `rayStartParams.labels` entry must never
reach every host's `ray start --labels`: two hosts claiming worker 0 make the reservation churn.
The rendered flag is read back with Ray's own parser.
"""

from __future__ import annotations

import shlex
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raycluster_operator.api.models import load_cluster

from .conftest import cluster_dict, env_of, tpu_worker_group, worker_pod

label_utils = pytest.importorskip("ray._private.label_utils")

IDENTITY_KEYS = (
    "ray.io/tpu-worker-id",
    "ray.io/tpu-slice-name",
    "ray.io/tpu-pod-type",
    "ray.io/tpu-topology",
)
#: (gke accelerator, topology, chips per host, hosts, Ray's pod type)
SHAPES = [
    ("tpu-v6e-slice", "4x4", 4, 4, "v6e-16"),
    ("tpu-v5p-slice", "2x2x2", 4, 2, "v5p-16"),
    ("tpu-v4-podslice", "2x2x4", 4, 4, "v4-32"),
    ("tpu-v6e-slice", "2x2", 4, 1, "v6e-4"),
]

_value = st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9_.-]{0,10}[A-Za-z0-9])?", fullmatch=True)
_other_key = st.from_regex(r"(example\.com/)?[a-z]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
_labels = st.dictionaries(st.sampled_from(IDENTITY_KEYS) | _other_key, _value, max_size=6)


def _labels_flag(pod: dict[str, Any]) -> dict[str, str]:
    line = env_of(pod)["KUBERAY_GEN_RAY_START_CMD"]
    flags = [a for a in shlex.split(line) if a.startswith("--labels=")]
    assert len(flags) == 1, line
    parsed: dict[str, str] = label_utils.parse_node_labels_string(flags[0][len("--labels=") :])
    return parsed


@settings(max_examples=150, deadline=None)
@given(
    shape=st.sampled_from(SHAPES),
    group_labels=_labels,
    start_labels=st.none() | _labels,
    replica=st.integers(0, 9),
    data=st.data(),
)
def test_rendered_ray_labels_carry_the_hosts_true_tpu_identity(
    shape: tuple[str, str, int, int, str],
    group_labels: dict[str, str],
    start_labels: dict[str, str] | None,
    replica: int,
    data: st.DataObject,
) -> None:
    accelerator, topology, chips, hosts, pod_type = shape
    host = data.draw(st.integers(0, hosts - 1), label="host")
    group = tpu_worker_group(numOfHosts=hosts, labels=group_labels)
    spec = group["template"]["spec"]
    spec["nodeSelector"] = {
        "cloud.google.com/gke-tpu-accelerator": accelerator,
        "cloud.google.com/gke-tpu-topology": topology,
    }
    spec["containers"][0]["resources"] = {"limits": {"google.com/tpu": str(chips)}}
    if start_labels is not None:
        group["rayStartParams"] = {"labels": ",".join(f"{k}={v}" for k, v in start_labels.items())}
    obj = cluster_dict()
    obj["spec"]["workerGroupSpecs"] = [group]
    cluster = load_cluster(obj)
    pod = worker_pod(
        cluster, replica=replica, host=host if hosts > 1 else None, replica_name="tpu-bcdfg"
    )
    labels = _labels_flag(pod)
    assert labels["ray.io/tpu-worker-id"] == str(host)
    assert labels["ray.io/tpu-slice-name"] == f"tpu-{replica}"
    assert labels["ray.io/tpu-pod-type"] == pod_type
    assert labels["ray.io/tpu-topology"] == topology
    # The TPU env Ray would derive the same labels from agrees with them.
    env = env_of(pod)
    assert (env["TPU_WORKER_ID"], env["TPU_NAME"]) == (str(host), f"tpu-{replica}")
    # Every other label the user gave is kept (rayStartParams.labels wins over the group's
    # labels field, as in KubeRay).
    user = start_labels if start_labels is not None else group_labels
    for key, value in user.items():
        if key not in IDENTITY_KEYS:
            assert labels[key] == value


def test_the_issue_workaround_no_longer_makes_every_host_worker_zero() -> None:
    """The group labels a KubeRay user adds for the autoscaler: hosts 0..3 stay 0..3."""
    group = tpu_worker_group(
        labels={"ray.io/tpu-pod-type": "v6e-16", "ray.io/tpu-worker-id": "0", "team": "a"}
    )
    obj = cluster_dict()
    obj["spec"]["workerGroupSpecs"] = [group]
    cluster = load_cluster(obj)
    ids = [_labels_flag(worker_pod(cluster, replica=1, host=h)) for h in range(4)]
    assert [i["ray.io/tpu-worker-id"] for i in ids] == ["0", "1", "2", "3"]
    assert {i["team"] for i in ids} == {"a"}
