"""What the simulated kubelet reports, as pure functions of container states."""

from __future__ import annotations

import pytest

from devkube.kubelet.podstatus import (
    ContainerRecord,
    PodRecord,
    pod_phase,
    qos_class,
    render_status,
)


def record(policy: str, *states: tuple[str, int]) -> PodRecord:
    return PodRecord(
        namespace="default",
        name="p",
        uid="u",
        node="n",
        host_ip="10.0.0.1",
        pod_ip="10.64.0.2",
        restart_policy=policy,
        start_time="t0",
        scheduled_at="t0",
        containers=[
            ContainerRecord(name=f"c{i}", state=state, exit_code=code, ready=state == "running")  # type: ignore[arg-type]
            for i, (state, code) in enumerate(states)
        ],
    )


@pytest.mark.parametrize(
    ("policy", "states", "phase"),
    [
        ("Always", [("waiting", 0)], "Pending"),
        ("Always", [("running", 0), ("waiting", 0)], "Running"),
        ("Never", [("terminated", 1), ("terminated", 0)], "Failed"),
        ("Never", [("terminated", 0), ("terminated", 0)], "Succeeded"),
        ("Never", [("terminated", 1), ("running", 0)], "Running"),
        ("OnFailure", [("terminated", 0)], "Succeeded"),
        ("OnFailure", [("terminated", 2)], "Running"),
        ("Always", [("terminated", 0)], "Running"),
    ],
)
def test_phase_follows_the_restart_policy(
    policy: str, states: list[tuple[str, int]], phase: str
) -> None:
    assert pod_phase(record(policy, *states)) == phase


def test_ready_needs_every_container_ready_and_the_node() -> None:
    both = record("Always", ("running", 0), ("running", 0))
    status = render_status(both, "t1")
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions["Ready"] == conditions["ContainersReady"] == "True"
    assert [c["name"] for c in status["containerStatuses"]] == ["c0", "c1"]
    both.node_ready = False
    conditions = {c["type"]: c["status"] for c in render_status(both, "t2")["conditions"]}
    assert conditions["Ready"] == "False"
    both.node_ready = True
    both.failed_reason = "NodeLost"
    lost = render_status(both, "t3")
    assert lost["phase"] == "Failed" and lost["reason"] == "NodeLost"


def test_qos_class() -> None:
    """The kubelet reads pods the API server defaulted (requests copied from limits)."""

    def spec(**resources: dict[str, str]) -> dict[str, object]:
        return {"containers": [{"resources": resources}]}

    assert qos_class(spec()) == "BestEffort"
    both = {"cpu": "1", "memory": "1Gi"}
    assert qos_class(spec(limits=both, requests=both)) == "Guaranteed"
    assert (
        qos_class(spec(limits=both, requests={"cpu": "1000m", "memory": "1024Mi"})) == "Guaranteed"
    )
    assert qos_class(spec(requests={"cpu": "1"})) == "Burstable"
    assert qos_class(spec(limits={"google.com/tpu": "4"})) == "BestEffort"
