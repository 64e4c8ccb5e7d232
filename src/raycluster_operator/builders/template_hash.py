"""Template identity: which spec fields shape a pod, folded into one short hash per group.

An upgrade needs to know whether a running pod was built from today's spec. Rebuilding a pod
to compare it would drag in its identity (names, indices, hostnames), so the hash is taken
over the *inputs* that shape a group's pods instead: the group's template and Ray settings,
and the few cluster-wide facts the builders read (the GCS port, autoscaler v2, the
overwrite-command annotation). Fields that only say how many pods exist (replicas, min/max,
workersToDelete, suspend, idle timeout) are left out, so scaling never looks like an upgrade.
See docs/design.md §3.8.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from raycluster_operator.api.models import RayCluster, WorkerGroupSpec
from raycluster_operator.builders.cluster_facts import (
    autoscaler_v2,
    autoscaling_enabled,
    gcs_port,
    overwrite_cmd,
)

#: Worker group fields that count pods instead of shaping them (python names).
_COUNTING = frozenset(
    {
        "replicas",
        "min_replicas",
        "max_replicas",
        "scale_strategy",
        "suspend",
        "idle_timeout_seconds",
    }
)
#: Length of the hex digest kept: 10 hex digits are ample for the few templates one group
#: ever sees, and short enough to read in ``kubectl get pods -o yaml``.
_DIGITS = 10


def worker_template_hash(cluster: RayCluster, group: WorkerGroupSpec) -> str:
    shaping = group.model_dump(by_alias=True, exclude=set(_COUNTING), exclude_none=True)
    return _digest({"group": shaping, "cluster": _cluster_inputs(cluster)})


def head_template_hash(cluster: RayCluster) -> str:
    spec = cluster.spec
    head = spec.head_group_spec.model_dump(by_alias=True, exclude_none=True)
    options = spec.autoscaler_options
    return _digest(
        {
            "head": head,
            "autoscaling": autoscaling_enabled(cluster),
            "autoscalerOptions": options.model_dump(by_alias=True, exclude_none=True)
            if options is not None
            else None,
            "cluster": _cluster_inputs(cluster),
        }
    )


def _cluster_inputs(cluster: RayCluster) -> dict[str, Any]:
    return {
        "gcsPort": gcs_port(cluster),
        "autoscalerV2": autoscaler_v2(cluster),
        "overwriteCmd": overwrite_cmd(cluster),
    }


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:_DIGITS]
