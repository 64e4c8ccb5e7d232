"""The identity of one worker pod: its cluster, group, slice and place within the slice.

Builders compute it once per pod (names come from ``api.names``) and every profile reads it, so
the hostname list in ``TPU_WORKER_HOSTNAMES`` and the pods' real hostnames cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HostIdentity:
    """Where one pod sits: its cluster, group, slice and host, and its peers' hostnames."""

    cluster: str
    group: str
    replica_index: int
    replica_name: str | None
    host_index: int
    num_hosts: int
    slice_name: str
    #: Fully qualified within the namespace (``hostname.subdomain``), in host order; empty for
    #: single-host groups.
    hostnames: tuple[str, ...]
    #: Unique among all slices of the Kubernetes cluster (``labels.SLICE_ID``); "" single-host.
    slice_id: str = ""
