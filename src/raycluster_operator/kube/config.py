"""Where the API server is and how to authenticate, the way kubectl would find out.

lightkube reads kubeconfig files (tokens, token files, exec credential plugins, client
certificates, CA bundles) and the in-cluster service account; we only choose the source and
apply an explicit, opt-in ``insecure`` override. TLS is verified unless that flag is given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightkube.config.kubeconfig import KubeConfig, SingleConfig
from lightkube.config.models import Cluster

__all__ = ["SingleConfig", "load_config"]


def load_config(
    kubeconfig: str | Path | dict[str, Any] | None = None,
    *,
    context: str | None = None,
    insecure: bool = False,
) -> SingleConfig:
    """The connection settings: an explicit kubeconfig (path or dict) wins, then the in-cluster
    service account, then ``$KUBECONFIG`` or ``~/.kube/config``."""
    if isinstance(kubeconfig, dict):
        source = KubeConfig.from_dict(kubeconfig)
    elif kubeconfig is not None:
        source = KubeConfig.from_file(kubeconfig)
    else:
        source = KubeConfig.from_env()
    config = source.get(context_name=context)
    if config is None:  # pragma: no cover - lightkube raises instead
        raise ValueError("no usable context in the kubeconfig")
    if insecure:
        config = config._replace(cluster=Cluster(server=config.cluster.server, insecure=True))
    return config
