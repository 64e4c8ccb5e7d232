"""A throwaway certificate authority per server start.

Clients of a real cluster verify the server against a CA from the kubeconfig, so the dev
server mints its own CA and serving certificate rather than asking anyone to skip TLS checks.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable
from dataclasses import dataclass

import trustme

# The loopback names plus the in-cluster names a real apiserver certificate carries, so pods run
# by a local kubelet runtime can reach it as `kubernetes.default.svc` through their hosts file.
DEFAULT_SANS = (
    "127.0.0.1",
    "localhost",
    "::1",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


@dataclass(frozen=True)
class ServingTLS:
    """The CA clients must trust and the server-side SSL context signed by it."""

    ca_pem: bytes
    context: ssl.SSLContext


def make_serving_tls(extra_sans: Iterable[str] = ()) -> ServingTLS:
    ca = trustme.CA(organization_name="devcluster")
    sans = list(dict.fromkeys([*DEFAULT_SANS, *extra_sans]))
    leaf = ca.issue_cert(*sans, common_name="devcluster-apiserver")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    leaf.configure_cert(context)
    return ServingTLS(ca_pem=ca.cert_pem.bytes(), context=context)
