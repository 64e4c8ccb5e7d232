"""Kept import path: the dev-cluster helpers live in harness/cluster.py."""

from harness.cluster import (
    ThreadedServer,
    client_ssl_context,
    stop_dev_cluster,
    write_ca,
    write_kubeconfig,
)

__all__ = [
    "ThreadedServer",
    "client_ssl_context",
    "stop_dev_cluster",
    "write_ca",
    "write_kubeconfig",
]
