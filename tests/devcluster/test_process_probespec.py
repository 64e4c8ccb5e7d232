from __future__ import annotations

import pytest

from devkube.process.probespec import (
    ProbeSpec,
    ProbeState,
    parse_probe,
    record,
)

CONTAINER = {"ports": [{"name": "http", "containerPort": 8080}]}


def test_http_probe_with_named_port_and_timing() -> None:
    spec = parse_probe(
        {
            "httpGet": {
                "path": "/healthz",
                "port": "http",
                "httpHeaders": [{"name": "X", "value": "1"}],
            },
            "periodSeconds": 2,
            "failureThreshold": 5,
        },
        CONTAINER,
    )
    assert spec == ProbeSpec(
        kind="http",
        port=8080,
        path="/healthz",
        headers=(("X", "1"),),
        period=2.0,
        failure_threshold=5,
    )


def test_tcp_and_exec_probes() -> None:
    tcp = parse_probe({"tcpSocket": {"port": 6379}}, CONTAINER)
    assert tcp is not None and (tcp.kind, tcp.port) == ("tcp", 6379)
    ex = parse_probe({"exec": {"command": ["cat", "/tmp/ok"]}, "initialDelaySeconds": 3}, CONTAINER)
    assert ex is not None and (ex.kind, ex.command, ex.initial_delay) == (
        "exec",
        ("cat", "/tmp/ok"),
        3.0,
    )


def test_absent_probe_is_none_and_unknown_port_name_is_an_error() -> None:
    assert parse_probe(None, CONTAINER) is None
    with pytest.raises(ValueError, match="names no container port"):
        parse_probe({"tcpSocket": {"port": "nope"}}, CONTAINER)


def test_verdict_flips_only_at_thresholds() -> None:
    spec = ProbeSpec(kind="tcp", success_threshold=2, failure_threshold=3)
    state = ProbeState(passing=False)
    state = record(spec, state, True)
    assert not state.passing
    state = record(spec, state, True)
    assert state.passing
    for _ in range(2):
        state = record(spec, state, False)
        assert state.passing
    state = record(spec, state, False)
    assert not state.passing
    state = record(spec, state, True)
    assert not state.passing, "one success is below the success threshold"


def test_a_success_resets_the_failure_count() -> None:
    spec = ProbeSpec(kind="tcp", failure_threshold=2)
    state = ProbeState(passing=True)
    state = record(spec, record(spec, state, False), True)
    assert record(spec, state, False).passing
