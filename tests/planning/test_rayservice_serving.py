"""``ray.io/serve`` on a multi-host slice's hosts (docs/design.md §12, RS4), pure: a host
serves while its slice is whole and its own Serve proxy answers."""

from __future__ import annotations

from typing import Any

from raycluster_operator.api import labels
from raycluster_operator.planning.rayservice.model import ServeAnswer
from raycluster_operator.planning.rayservice.serving import (
    Relabel,
    endpoints,
    relabels,
    slice_host,
)

CLUSTER = {"spec": {"workerGroupSpecs": [{"groupName": "tpu", "numOfHosts": 2}]}}


def _pod(name: str, *, host: int | None = None, ready: bool = True, serve: str) -> Any:
    found = {labels.NODE_TYPE: "head", labels.SERVE: serve}
    if host is not None:
        found = {
            labels.NODE_TYPE: "worker",
            labels.SERVE: serve,
            labels.GROUP: "tpu",
            labels.REPLICA_NAME: "tpu-abcde",
            labels.REPLICA_INDEX: "0",
            labels.HOST_INDEX: str(host),
        }
    condition = {"type": "Ready", "status": "True" if ready else "False"}
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": name, "labels": found},
        "spec": {"containers": [{"name": "ray"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.9", "conditions": [condition]},
    }


def _answer(**proxies: bool) -> ServeAnswer:
    return ServeAnswer(asked=True, reachable=True, proxy_healthy=True, proxies=proxies)


def test_a_whole_slice_serves_from_the_hosts_whose_proxy_answers() -> None:
    pods = [
        _pod("head", serve="false"),
        _pod("h0", host=0, serve="false"),
        _pod("h1", host=1, serve="false"),
    ]
    changes = relabels(CLUSTER, pods, _answer(h0=True, h1=False), exclude_head=False)
    assert changes == [
        Relabel("head", "true"),
        Relabel("h0", "true", "tpu-0", "ready", whole=True),
    ]
    assert endpoints(pods, changes) == 2
    # Not asked (no answer at all): no host of the slice serves.
    assert relabels(CLUSTER, pods[1:], None, exclude_head=False) == []


def test_a_host_whose_proxy_stops_leaves_alone_and_a_broken_slice_leaves_whole() -> None:
    pods = [_pod("h0", host=0, serve="true"), _pod("h1", host=1, serve="true")]
    gone = relabels(CLUSTER, pods, _answer(h0=False, h1=True), exclude_head=False)
    assert gone == [Relabel("h0", "false", "tpu-0", "ready", whole=True)]
    assert endpoints(pods, gone) == 1
    broken = [pods[0], _pod("h1", host=1, ready=False, serve="true")]
    out = relabels(CLUSTER, broken, _answer(h0=True), exclude_head=False)
    moved = [(r.pod, r.value, r.whole) for r in out]
    assert moved == [("h0", "false", False), ("h1", "false", False)]
    assert endpoints(broken, out) == 0


def test_the_controller_asks_the_proxies_of_slice_hosts_only() -> None:
    """A single-host worker's readiness probe checks its proxy; the head's is asked apart."""
    single = {"spec": {"workerGroupSpecs": [{"groupName": "tpu", "numOfHosts": 1}]}}
    host = _pod("h0", host=0, serve="false")
    assert slice_host(CLUSTER, host)
    assert not slice_host(single, host)
    assert not slice_host(CLUSTER, _pod("head", serve="false"))
