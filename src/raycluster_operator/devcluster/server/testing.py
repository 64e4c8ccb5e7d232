"""Helpers for tests and tools that talk to an `ApiServer` from outside its process."""

from __future__ import annotations

import ssl
from pathlib import Path

import yaml

from .app import ApiServer


def client_ssl_context(server: ApiServer) -> ssl.SSLContext:
    """An SSL context that trusts exactly this server's CA."""
    return ssl.create_default_context(cadata=server.ca_pem.decode())


def write_kubeconfig(server: ApiServer, path: Path, context: str = "dev") -> Path:
    path.write_text(yaml.safe_dump(server.kubeconfig_dict(context)))
    return path


def write_ca(server: ApiServer, path: Path) -> Path:
    path.write_bytes(server.ca_pem)
    return path
