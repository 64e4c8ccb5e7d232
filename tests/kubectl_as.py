"""The real kubectl as someone other than the admin: a ServiceAccount's token from
`kubectl create token`, written into its own kubeconfig."""

from __future__ import annotations

from pathlib import Path

import yaml

from devkube import DevCluster
from kubectl_bin import Run, runner


async def ok(run: Run, *args: str, input: str | None = None) -> str:
    done = await run(*args, input=input)
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout


async def refused(run: Run, *args: str, input: str | None = None) -> str:
    """kubectl's stderr for a request the server refused (one line, the Status message)."""
    done = await run(*args, input=input)
    assert done.returncode != 0, (args, done.stdout)
    return done.stderr.strip()


async def as_service_account(
    admin: Run, cluster: DevCluster, tmp: Path, name: str, namespace: str = "default"
) -> Run:
    """Create ServiceAccount NAMESPACE/NAME (if missing), take a token with `kubectl create
    token`, and return kubectl acting with it."""
    existing = await admin("get", "serviceaccount", name, "-n", namespace)
    if existing.returncode != 0:
        await ok(admin, "create", "serviceaccount", name, "-n", namespace)
    token = (await ok(admin, "create", "token", name, "-n", namespace)).strip()
    path = tmp / f"kubeconfig-{namespace}-{name}"
    path.write_text(yaml.safe_dump(cluster.kubeconfig_dict(token=token, namespace=namespace)))
    return runner(path)


def user_of(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"
