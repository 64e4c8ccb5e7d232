"""Every name the operator derives from user names, kept within Kubernetes limits.

KubeRay truncates silently, and the TPU webhook then builds hostnames from a service name that
was cut differently (a known bug class). Here one rule shortens every derived name: when the
full name would exceed its limit, a prefix is kept and a 5-character digest of the *full* name
is appended, so shortening is deterministic and two different long names never collide by
truncation. Every consumer (pod builder, env, service builder, validation) calls these.
"""

from __future__ import annotations

import hashlib

from kubefacts.names import SUFFIX_ALPHABET

#: RFC 1123 / RFC 1035 label: hostnames, service names, label values.
DNS_LABEL_MAX = 63
#: KubeRay cuts `<cluster>-<group>` to this before adding `-worker-` to make generateName.
GENERATE_NAME_PREFIX_MAX = 50
_DIGEST_LEN = 5


def digest(text: str, length: int = _DIGEST_LEN) -> str:
    """A short, stable, DNS-safe digest of ``text`` (letters and digits, no vowels)."""
    raw = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    out = []
    for _ in range(length):
        raw, rem = divmod(raw, len(SUFFIX_ALPHABET))
        out.append(SUFFIX_ALPHABET[rem])
    return "".join(out)


def fit(name: str, limit: int = DNS_LABEL_MAX, *, suffix: str = "") -> str:
    """``name + suffix`` if it fits in ``limit``, else a shortened prefix, a digest, the suffix.

    The suffix (such as ``-headless`` or ``-3-0``) is always kept whole so that the meaning of a
    name survives shortening; the digest covers the full name so different names stay distinct.
    """
    if len(name) + len(suffix) <= limit:
        return name + suffix
    keep = limit - len(suffix) - _DIGEST_LEN - 1
    if keep < 1:
        raise ValueError(f"suffix {suffix!r} leaves no room in a name of {limit} characters")
    prefix = name[:keep].rstrip("-.")
    return f"{prefix}-{digest(name)}{suffix}"


def head_service_name(cluster: str) -> str:
    return fit(cluster, suffix="-head-svc")


def headless_service_name(cluster: str) -> str:
    return fit(cluster, suffix="-headless")


def serve_service_name(cluster: str) -> str:
    return fit(cluster, suffix="-serve-svc")


def replica_name(group: str, suffix: str) -> str:
    """``ray.io/worker-group-replica-name``: ``<group>-<5 chars>``, a label value."""
    return fit(group, suffix=f"-{suffix}")


def slice_name(group: str, replica_index: int) -> str:
    """``TPU_NAME`` and the ``replicaIndex`` label value: ``<group>-<replicaIndex>``."""
    return fit(group, suffix=f"-{replica_index}")


def slice_id(namespace: str, cluster: str, group: str, replica_index: int) -> str:
    """``ray.io/slice-id``: one value per slice in the whole Kubernetes cluster, a label value
    (a digest: names can be 63 characters each)."""
    digest = hashlib.sha256(f"{namespace}/{cluster}/{group}/{replica_index}".encode())
    return digest.hexdigest()[:20]


def host_name(group: str, replica_index: int, host_index: int) -> str:
    """``spec.hostname`` of a multi-host pod: ``<group>-<replicaIndex>-<hostIndex>``."""
    return fit(group, suffix=f"-{replica_index}-{host_index}")


def worker_generate_name(cluster: str, group: str) -> str:
    """KubeRay's generateName for worker pods: ``<cluster>-<group>`` cut to 50, ``-worker-``."""
    return f"{cluster}-{group}"[:GENERATE_NAME_PREFIX_MAX].lower() + "-worker-"


def compute_domain_name(cluster: str, replica_name: str) -> str:
    """A slice's ComputeDomain (and its ResourceClaimTemplate, which the driver names alike):
    ``<cluster>-<replica name>``, so a replaced slice (a new replica name) gets a new one."""
    return fit(f"{cluster}-{replica_name}")


def head_generate_name(cluster: str) -> str:
    return f"{cluster}-head"[:GENERATE_NAME_PREFIX_MAX].lower() + "-"
