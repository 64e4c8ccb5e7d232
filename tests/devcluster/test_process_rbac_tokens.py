"""The token the kubelet mounts into a pod (process runtime) is the pod's own ServiceAccount's,
bound to the pod: kubectl with it is that ServiceAccount, with the pod named in its extra
fields, it has only that account's grants, and it dies with the pod."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devkube import DevCluster
from tests.harness.cluster import running_cluster
from tests.harness.kubectl import Run, ok, refused, runner

pytestmark = pytest.mark.process_runtime

SHOW_TOKEN = """
import os, time
path = "/var/run/secrets/kubernetes.io/serviceaccount/token"
print(open(path).read() if os.path.exists(path) else "NO-TOKEN", flush=True)
time.sleep(3600)
"""


@pytest.fixture
async def dev_cluster() -> AsyncIterator[DevCluster]:
    """Overrides the shared fixture, so `kubectl` talks to this cluster."""
    async with running_cluster(runtime="process", nodes=["cpu:1"]) as cluster:
        yield cluster


def pod(name: str, **spec: Any) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "python",
                        "command": [sys.executable, "-c", SHOW_TOKEN],
                    }
                ],
                **spec,
            },
        }
    )


async def mounted_token(kubectl: Run, name: str, eventually: Any) -> str:
    async def printed() -> str:
        out = (await kubectl("logs", name)).stdout.strip()
        assert out, "nothing printed yet"
        return out

    result: str = await eventually(printed)
    return result


async def test_a_pods_token_is_its_service_accounts_and_dies_with_it(
    kubectl: Run, dev_cluster: DevCluster, tmp_path: Path, eventually: Any
) -> None:
    await ok(kubectl, "create", "serviceaccount", "reader")
    await ok(kubectl, "create", "role", "reader", "--verb=list", "--resource=pods")
    await ok(
        kubectl,
        "create",
        "rolebinding",
        "reader",
        "--role=reader",
        "--serviceaccount=default:reader",
    )
    await ok(kubectl, "apply", "-f", "-", input=pod("as-reader", serviceAccountName="reader"))
    await ok(kubectl, "apply", "-f", "-", input=pod("as-default"))
    await ok(kubectl, "apply", "-f", "-", input=pod("no-token", automountServiceAccountToken=False))

    runs = {}
    for name in ("as-reader", "as-default"):
        path = tmp_path / name
        token = await mounted_token(kubectl, name, eventually)
        path.write_text(yaml.safe_dump(dev_cluster.kubeconfig_dict(token=token)))
        runs[name] = runner(path)
    assert await mounted_token(kubectl, "no-token", eventually) == "NO-TOKEN"

    who = yaml.safe_load(await ok(runs["as-reader"], "auth", "whoami", "-o", "json"))
    info = who["status"]["userInfo"]
    assert info["username"] == "system:serviceaccount:default:reader"
    assert info["extra"]["authentication.kubernetes.io/pod-name"] == ["as-reader"]
    assert "as-reader" in await ok(runs["as-reader"], "get", "pods", "-o", "name")
    default_user = "system:serviceaccount:default:default"
    assert await refused(runs["as-default"], "get", "pods") == (
        f'Error from server (Forbidden): pods is forbidden: User "{default_user}" cannot list '
        'resource "pods" in API group "" in the namespace "default"'
    )

    await ok(kubectl, "delete", "pod", "as-reader", "--wait=true")
    gone = await refused(runs["as-reader"], "get", "pods")
    assert gone.splitlines()[-1].startswith("error: You must be logged in to the server")
