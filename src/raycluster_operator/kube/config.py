"""Where the API server is and how to authenticate, the way kubectl would find out.

lightkube reads kubeconfig files (tokens, token files, exec credential plugins, client
certificates, CA bundles); in-cluster configuration is chosen here, explicitly: a pod is in a
cluster when the kubelet set ``KUBERNETES_SERVICE_HOST`` and mounted a service-account token.
The token is read from its file on every 401 (bound tokens rotate), and the cluster CA from
the mounted ``ca.crt``. TLS is verified unless the opt-in ``insecure`` override is given.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lightkube.config.kubeconfig import KubeConfig, SingleConfig
from lightkube.config.models import Cluster

__all__ = ["SERVICE_ACCOUNT_DIR", "SingleConfig", "in_cluster_config", "load_config"]

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def in_cluster_config(
    service_account: Path | None = None, env: Mapping[str, str] | None = None
) -> SingleConfig | None:
    """The pod's own identity (token, CA, namespace from the mounted service account; server
    from the kubelet's ``KUBERNETES_SERVICE_*``), or None when not running in a pod."""
    env = os.environ if env is None else env
    service_account = SERVICE_ACCOUNT_DIR if service_account is None else service_account
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    token_file = service_account / "token"
    if not host or not port or not token_file.is_file():
        return None
    namespace_file = service_account / "namespace"
    namespace = namespace_file.read_text().strip() if namespace_file.is_file() else "default"
    server_host = f"[{host}]" if ":" in host else host
    ca = service_account / "ca.crt"
    source = KubeConfig.from_dict(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "in-cluster",
                    "cluster": {
                        "server": f"https://{server_host}:{port}",
                        **({"certificate-authority": str(ca)} if ca.is_file() else {}),
                    },
                }
            ],
            "users": [{"name": "service-account", "user": {"tokenFile": str(token_file)}}],
            "contexts": [
                {
                    "name": "in-cluster",
                    "context": {
                        "cluster": "in-cluster",
                        "user": "service-account",
                        "namespace": namespace,
                    },
                }
            ],
            "current-context": "in-cluster",
        }
    )
    return source.get()


def load_config(
    kubeconfig: str | Path | dict[str, Any] | None = None,
    *,
    context: str | None = None,
    insecure: bool = False,
) -> SingleConfig:
    """The connection settings: an explicit kubeconfig (path or dict) wins, then the in-cluster
    service account, then ``$KUBECONFIG`` or ``~/.kube/config``."""
    config: SingleConfig | None = None
    if isinstance(kubeconfig, dict):
        config = KubeConfig.from_dict(kubeconfig).get(context_name=context)
    elif kubeconfig is not None:
        config = KubeConfig.from_file(kubeconfig).get(context_name=context)
    else:
        config = in_cluster_config() if context is None else None
        if config is None:
            default = Path.home() / ".kube" / "config"
            path = os.environ.get("KUBECONFIG") or str(default)
            config = KubeConfig.from_file(path).get(context_name=context)
    if config is None:  # pragma: no cover - lightkube raises instead
        raise ValueError("no usable context in the kubeconfig")
    if insecure:
        config = config._replace(cluster=Cluster(server=config.cluster.server, insecure=True))
    return config
