"""Environment variables of the Ray container: KubeRay's, then multi-host identity.

Everything is appended without replacing a variable the user set: a user value wins, which is
what the TPU webhook did and what lets a user pin e.g. ``TPU_NAME`` for an experiment.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from raycluster_operator.accelerators import HostIdentity
from raycluster_operator.api import labels
from raycluster_operator.builders.fields import ensure_list

#: The pod IP from the downward API; ``ray start --node-ip-address`` reads it (the name older
#: KubeRay releases and their sample manifests use, so ``$MY_POD_IP`` in rayStartParams works).
POD_IP_ENV = "MY_POD_IP"


def field_ref(path: str) -> dict[str, Any]:
    return {"valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}}


def env_names(container: Mapping[str, Any]) -> set[str]:
    env = container.get("env")
    if not isinstance(env, list):
        return set()
    return {str(e["name"]) for e in env if isinstance(e, Mapping) and "name" in e}


#: KubeRay's env for a RayService's Ray containers (``BuildPod``, v1.7), unless the user set
#: them: a dead worker's tasks fail at once, and GCS and Serve's KV calls give up after 5 s,
#: so a replica on a lost host is replaced rather than waited for.
SERVING_ENV: tuple[tuple[str, str], ...] = (
    ("RAY_TIMEOUT_MS_TASK_WAIT_FOR_DEATH_INFO", "0"),
    ("RAY_GCS_SERVER_REQUEST_TIMEOUT_SECONDS", "5"),
    ("RAY_SERVE_KV_TIMEOUT_S", "5"),
)


def add_env(
    container: dict[str, Any],
    items: Iterable[tuple[str, str | dict[str, Any]]],
    *,
    present: set[str] | None = None,
) -> None:
    """Append ``items`` (value strings or ``valueFrom`` dicts) whose names are not yet set.

    ``present``, when given, must hold the names already in the container's env; it is kept
    up to date, so a builder adding env in several steps reads the env list once.
    """
    env = ensure_list(container, "env")
    if present is None:
        present = env_names(container)
    for name, value in items:
        if name in present:
            continue
        present.add(name)
        env.append(
            {"name": name, **value} if isinstance(value, dict) else {"name": name, "value": value}
        )


def common_env(namespace: str, start_command: str) -> list[tuple[str, str | dict[str, Any]]]:
    return [
        (POD_IP_ENV, field_ref("status.podIP")),
        ("RAY_CLUSTER_NAME", field_ref(f"metadata.labels['{labels.CLUSTER}']")),
        ("RAY_CLUSTER_NAMESPACE", namespace),
        ("RAY_CLOUD_INSTANCE_ID", field_ref("metadata.name")),
        ("RAY_NODE_TYPE_NAME", field_ref(f"metadata.labels['{labels.GROUP}']")),
        ("RAY_USAGE_STATS_KUBERAY_IN_USE", "1"),
        ("KUBERAY_GEN_RAY_START_CMD", start_command),
    ]


def head_env(
    namespace: str, start_command: str, gcs_port: int
) -> list[tuple[str, str | dict[str, Any]]]:
    return [
        *common_env(namespace, start_command),
        ("RAY_ADDRESS", f"127.0.0.1:{gcs_port}"),
        ("RAY_PORT", str(gcs_port)),
        ("RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE", "1"),
    ]


def worker_env(
    namespace: str, start_command: str, head_fqdn: str, head_service: str, gcs_port: int
) -> list[tuple[str, str | dict[str, Any]]]:
    return [
        ("FQ_RAY_IP", head_fqdn),
        ("RAY_IP", head_service),
        *common_env(namespace, start_command),
        ("RAY_ADDRESS", f"{head_fqdn}:{gcs_port}"),
        ("RAY_PORT", str(gcs_port)),
        ("RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE", "1"),
    ]


def multi_host_env(identity: HostIdentity) -> list[tuple[str, str | dict[str, Any]]]:
    """Slice identity for frameworks other than JAX-on-TPU (PyTorch, NCCL rendezvous, ...)."""
    out: list[tuple[str, str | dict[str, Any]]] = [
        ("RAY_REPLICA_INDEX", str(identity.replica_index)),
    ]
    if identity.replica_name is not None:
        out.append(("RAY_REPLICA_NAME", identity.replica_name))
    out += [
        ("RAY_HOST_INDEX", str(identity.host_index)),
        ("RAY_NUM_HOSTS", str(identity.num_hosts)),
        ("RAY_REPLICA_HOSTNAMES", ",".join(identity.hostnames)),
    ]
    return out
