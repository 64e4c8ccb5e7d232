"""The files a kubeadm-made control plane starts from, minted per start: one CA (serving and
client certificates, the kubelet API's serving certificate), the ServiceAccount signing key,
and a static token file for the identities the dev tier hands out (docs/design.md §8.2).

Static tokens stand in for kubeadm's client certificates: the admin is in `system:masters`,
the controller manager and the scheduler are the users Kubernetes' bootstrap RBAC binds, and
each node is `system:node:<name>` in `system:nodes`, so the Node authorizer and NodeRestriction
judge the kubelets as they judge real ones.
"""

from __future__ import annotations

import csv
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import trustme
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from devkube.server.tls import DEFAULT_SANS

#: The in-cluster address of `kubernetes.default` in --service-cluster-ip-range's first /12.
SERVICE_CIDR = "10.96.0.0/12"
KUBERNETES_SERVICE_IP = "10.96.0.1"

ADMIN = ("kubernetes-admin", ("system:masters",))
CONTROLLER_MANAGER = ("system:kube-controller-manager", ())
SCHEDULER = ("system:kube-scheduler", ())


def node_user(name: str) -> tuple[str, tuple[str, ...]]:
    return f"system:node:{name}", ("system:nodes",)


@dataclass
class Identity:
    user: str
    groups: tuple[str, ...]
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))


@dataclass
class ControlPlanePki:
    """Written under `directory`; paths are what the binaries' flags take."""

    directory: Path
    ca_pem: bytes
    identities: dict[str, Identity]

    @property
    def ca_file(self) -> Path:
        return self.directory / "ca.crt"

    def path(self, name: str) -> Path:
        return self.directory / name

    def token(self, user: str) -> str:
        return self.identities[user].token


def mint(
    directory: Path, *, node_names: Sequence[str], extra_sans: Iterable[str] = ()
) -> ControlPlanePki:
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="raycluster-operator dev tier")
    sans = list(dict.fromkeys([*DEFAULT_SANS, KUBERNETES_SERVICE_IP, *extra_sans]))
    serving = ca.issue_cert(*sans, common_name="kube-apiserver")
    # What kube-apiserver presents to kubelets (logs, exec, port-forward).
    kubelet_client = ca.issue_cert(
        "kube-apiserver-kubelet-client",
        common_name="kube-apiserver-kubelet-client",
        organization_name="kubeadm:cluster-admins",
    )
    # What the kubelet API presents to kube-apiserver, which checks it against the cluster CA
    # (--kubelet-certificate-authority): the nodes' addresses are all in `sans`.
    kubelet_serving = ca.issue_cert(*sans, common_name="kubelet")
    (directory / "ca.crt").write_bytes(ca.cert_pem.bytes())
    (directory / "ca.key").write_bytes(ca.private_key_pem.bytes())
    (directory / "apiserver.crt").write_bytes(b"".join(b.bytes() for b in serving.cert_chain_pems))
    (directory / "apiserver.key").write_bytes(serving.private_key_pem.bytes())
    (directory / "kubelet-client.crt").write_bytes(kubelet_client.cert_chain_pems[0].bytes())
    (directory / "kubelet-client.key").write_bytes(kubelet_client.private_key_pem.bytes())
    (directory / "kubelet.crt").write_bytes(
        b"".join(b.bytes() for b in kubelet_serving.cert_chain_pems)
    )
    (directory / "kubelet.key").write_bytes(kubelet_serving.private_key_pem.bytes())
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (directory / "sa.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    (directory / "sa.pub").write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    people = [ADMIN, CONTROLLER_MANAGER, SCHEDULER, *(node_user(n) for n in node_names)]
    identities = {user: Identity(user, groups) for user, groups in people}
    with (directory / "tokens.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        for number, identity in enumerate(identities.values()):
            row = [identity.token, identity.user, f"uid-{number}"]
            if identity.groups:
                row.append(",".join(identity.groups))
            writer.writerow(row)
    return ControlPlanePki(directory, ca.cert_pem.bytes(), identities)


def serving_cert(pki: ControlPlanePki, cert: Path, key: Path, *sans: str) -> None:
    """A serving certificate for `sans`, signed by the cluster CA, written to `cert` and `key`:
    what a webhook server that kube-apiserver calls by `url` presents (its configuration's
    caBundle is then the cluster CA, which signs kubeadm's own servers too)."""
    ca = trustme.CA.from_pem(pki.ca_file.read_bytes(), pki.path("ca.key").read_bytes())
    leaf = ca.issue_cert(*sans, common_name=sans[0])
    cert.write_bytes(b"".join(b.bytes() for b in leaf.cert_chain_pems))
    key.write_bytes(leaf.private_key_pem.bytes())
