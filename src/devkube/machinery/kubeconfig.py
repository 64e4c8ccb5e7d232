"""The kubeconfig a dev cluster hands out, whichever control plane serves it."""

from __future__ import annotations

import base64
from typing import Any


def kubeconfig_dict(
    url: str, ca_pem: bytes, token: str, *, context: str = "dev", namespace: str = "default"
) -> dict[str, Any]:
    """The CA inline and a bearer token: what kubectl, the operator and the control plane's
    own binaries (`--kubeconfig`) read alike."""
    ca = base64.b64encode(ca_pem).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": context, "cluster": {"server": url, "certificate-authority-data": ca}}
        ],
        "users": [{"name": context, "user": {"token": token}}],
        "contexts": [
            {
                "name": context,
                "context": {"cluster": context, "user": context, "namespace": namespace},
            }
        ],
        "current-context": context,
        "preferences": {},
    }
