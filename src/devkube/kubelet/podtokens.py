"""The ServiceAccount token a kubelet mounts into a pod.

As the real kubelet does for its projected `kube-api-access` volume, the token is requested
through the TokenRequest API for the pod's `spec.serviceAccountName` (`default` when unset),
bound to the pod (so it stops working once the pod is gone) and asked for 3607 s, which the
API server stretches to a year for kubelet-mounted tokens. Pods that opt out with
`automountServiceAccountToken: false` get none. A ServiceAccount that does not exist yet is
waited for, as the kubelet retries a mount until its ServiceAccount appears.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from devkube.machinery.client import ApiClient, ApiError, resource_path

KUBELET_EXPIRATION = 3607


def wants_token(pod: Mapping[str, Any]) -> bool:
    return (pod.get("spec") or {}).get("automountServiceAccountToken") is not False


def service_account_of(pod: Mapping[str, Any]) -> str:
    spec = pod.get("spec") or {}
    return str(spec.get("serviceAccountName") or spec.get("serviceAccount") or "default")


async def pod_token(
    client: ApiClient, pod: Mapping[str, Any], *, attempts: int = 60, delay: float = 0.5
) -> str:
    """A token of the pod's ServiceAccount bound to the pod; ApiError if it cannot be had
    (the ServiceAccount is still missing after `attempts` tries, or the pod is gone)."""
    meta = pod.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
    path = resource_path("v1", "serviceaccounts", namespace, service_account_of(pod), "token")
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {
            "expirationSeconds": KUBELET_EXPIRATION,
            "boundObjectRef": {
                "kind": "Pod",
                "apiVersion": "v1",
                "name": name,
                "uid": str(meta.get("uid") or ""),
            },
        },
    }
    for attempt in range(attempts):
        try:
            answer = await client.create(path, body)
            return str(answer["status"]["token"])
        except ApiError as error:
            if error.status != 404 or attempt == attempts - 1:
                raise
        await asyncio.sleep(delay)
    raise AssertionError("unreachable")
