"""DevCluster as a whole: apply, kubeconfig, kubectl, CRDs registered at run time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from devkube import DevCluster
from tests.harness.manifests import crd

CRD = crd("widgets", "Widget")
#: One cluster for the module's tests (each writes names of its own; docs/design.md §8.1).
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture
def dev_cluster(module_cluster: DevCluster) -> DevCluster:
    return module_cluster


async def test_kubectl_sees_the_simulated_nodes_with_their_labels(
    dev_cluster: DevCluster, kubectl: Any
) -> None:
    result = await kubectl("get", "nodes", "-o", "json")
    assert result.returncode == 0, result.stderr
    nodes = json.loads(result.stdout)["items"]
    assert sorted(n["metadata"]["name"] for n in nodes) == sorted(dev_cluster.node_names)
    pools = {
        n["metadata"]["labels"]["cloud.google.com/gke-nodepool"]
        for n in nodes
        if "cloud.google.com/gke-tpu-topology" in n["metadata"]["labels"]
    }
    assert pools == {"tpu-v6e-4x4-0", "tpu-v6e-4x4-1"}
    ready = [c for n in nodes for c in n["status"]["conditions"] if c["type"] == "Ready"]
    assert len(ready) == len(nodes) and all(c["status"] == "True" for c in ready)
    assert all(n["status"]["allocatable"].get("pods") == "110" for n in nodes)


async def test_apply_creates_then_replaces(dev_cluster: DevCluster) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "1"}}
    created = await dev_cluster.apply(cm)
    assert created["metadata"]["namespace"] == "default"
    replaced = await dev_cluster.apply({**cm, "data": {"a": "2"}})
    assert replaced["data"] == {"a": "2"}
    assert replaced["metadata"]["uid"] == created["metadata"]["uid"]
    other = await dev_cluster.apply({**cm, "metadata": {"name": "cfg", "namespace": "team"}})
    assert other["metadata"]["namespace"] == "team"


async def test_a_crd_and_its_resource_in_one_install(dev_cluster: DevCluster) -> None:
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    _, created = await dev_cluster.install([CRD, {**widget, "spec": {"size": 3}}])
    assert created["spec"] == {"size": 3}
    got = await dev_cluster.client.get("/apis/example.com/v1/namespaces/default/widgets/w")
    assert got["metadata"]["uid"] == created["metadata"]["uid"]


async def test_write_kubeconfig_is_complete_and_private(
    dev_cluster: DevCluster, tmp_path: Path
) -> None:
    path = dev_cluster.write_kubeconfig(tmp_path / "deep" / "kubeconfig")
    config = yaml.safe_load(path.read_text())
    assert config["clusters"][0]["cluster"]["server"] == dev_cluster.url
    assert config["users"][0]["user"]["token"] == dev_cluster.token
    assert path.stat().st_mode & 0o077 == 0
    assert [p.name for p in path.parent.iterdir()] == ["kubeconfig"]  # no temp file left


async def test_faults_are_the_servers(dev_cluster: DevCluster) -> None:
    assert dev_cluster.faults is dev_cluster.server.faults


async def test_unknown_runtime_is_refused() -> None:  # async: the module mark
    with pytest.raises(ValueError, match="unknown runtime"):
        DevCluster(runtime="firecracker")
