"""Head and worker pod manifests: the user's template plus everything KubeRay and the TPU
webhook would have added, computed in one pure step so a pod is right when it is created.

The first container of a template runs Ray (KubeRay's convention). Its ``command`` is replaced
by ``ray start`` preceded by the user's own command, unless the cluster carries the KubeRay
annotation ``ray.io/overwrite-container-cmd: "true"``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from raycluster_operator.accelerators import (
    AcceleratorKind,
    HostIdentity,
    merge_affinity,
    profile_for,
    tpu_container_positions,
    wants_compute_domains,
)
from raycluster_operator.accelerators.profile import RAY_GPU_DOMAIN
from raycluster_operator.api import labels, names
from raycluster_operator.api.models import RayCluster, WorkerGroupSpec
from raycluster_operator.builders import autoscaler, env, probes, ray_start
from raycluster_operator.builders.cluster_facts import (
    autoscaler_v2,
    autoscaling_enabled,
    gcs_port,
    overwrite_cmd,
    split_template,
)
from raycluster_operator.builders.fields import ensure_list
from raycluster_operator.builders.metadata import (
    base_labels,
    default_labels,
    merge_labels,
    owner_reference,
    rayservice_serve_label,
    serves_rayservice,
)
from raycluster_operator.builders.template_hash import (
    head_template_hash,
    recreate_hash,
    worker_template_hash,
)

SHM_VOLUME = "shared-mem"
SHM_PATH = "/dev/shm"

# The node's address is the pod IP (downward API), not what Ray would guess by routing: the
# same answer in a pod network, and the only right one where pods share a network (the dev
# cluster's process runtime, hostNetwork pods on a multi-homed node). A user value wins.
_NODE_IP = {"node-ip-address": f"${env.POD_IP_ENV}"}
_HEAD_DEFAULTS = {
    "dashboard-host": "0.0.0.0",
    "metrics-export-port": str(ray_start.METRICS_PORT),
    "dashboard-agent-listen-port": str(ray_start.DASHBOARD_AGENT_PORT),
    **_NODE_IP,
}
_WORKER_DEFAULTS = {
    "metrics-export-port": str(ray_start.METRICS_PORT),
    "dashboard-agent-listen-port": str(ray_start.DASHBOARD_AGENT_PORT),
    **_NODE_IP,
}


def head_fqdn(cluster: RayCluster) -> str:
    service = names.head_service_name(cluster.metadata.name)
    return f"{service}.{cluster.metadata.namespace}.svc.cluster.local"


def _ray_container(spec: dict[str, Any]) -> dict[str, Any]:
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers or not isinstance(containers[0], dict):
        raise ValueError("a pod template needs a first container that runs Ray")
    return containers[0]


def _group_params(
    user: Mapping[str, str],
    resources: Mapping[str, str] | None,
    group_labels: Mapping[str, str] | None,
) -> dict[str, str]:
    """KubeRay ≥1.4 group fields ``resources``/``labels`` are ray start flags in disguise."""
    params = dict(user)
    if resources and "resources" not in params:
        params["resources"] = "'" + json.dumps(dict(resources), separators=(",", ":")) + "'"
    if group_labels and "labels" not in params:
        params["labels"] = ",".join(f"{k}={v}" for k, v in group_labels.items())
    return params


def _set_command(cluster: RayCluster, container: dict[str, Any], start: str) -> None:
    """KubeRay leaves the command alone when asked to, or when it already runs ray start."""
    if overwrite_cmd(cluster) or "ray start" in ray_start.user_command(container):
        return
    container["command"], container["args"] = ray_start.container_command(container, start)


def _add_shared_memory(spec: dict[str, Any], container: dict[str, Any]) -> None:
    """A memory-backed /dev/shm for Ray's object store, sized like the container (KubeRay)."""
    mounts = ensure_list(container, "volumeMounts")
    if any(isinstance(m, Mapping) and m.get("mountPath") == SHM_PATH for m in mounts):
        return
    volumes = ensure_list(spec, "volumes")
    if not any(isinstance(v, Mapping) and v.get("name") == SHM_VOLUME for v in volumes):
        empty_dir: dict[str, Any] = {"medium": "Memory"}
        resources = container.get("resources")
        if isinstance(resources, Mapping):
            for kind in ("limits", "requests"):
                section = resources.get(kind)
                if isinstance(section, Mapping) and "memory" in section:
                    empty_dir["sizeLimit"] = section["memory"]
                    break
        volumes.append({"name": SHM_VOLUME, "emptyDir": empty_dir})
    mounts.append({"name": SHM_VOLUME, "mountPath": SHM_PATH})


def _add_metrics_port(container: dict[str, Any], params: Mapping[str, str]) -> None:
    ports = ensure_list(container, "ports")
    if not any(isinstance(p, Mapping) and p.get("name") == "metrics" for p in ports):
        port = params.get("metrics-export-port", "")
        number = int(port) if port.isdecimal() else ray_start.METRICS_PORT
        ports.append({"name": "metrics", "containerPort": number})


def _pod(
    cluster: RayCluster,
    *,
    generate_name: str,
    meta: Mapping[str, Any],
    pod_labels: Mapping[str, str],
    spec: dict[str, Any],
    template_hash: str,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "generateName": generate_name,
        "namespace": cluster.metadata.namespace,
        "labels": dict(pod_labels),
        "ownerReferences": [owner_reference(cluster)],
    }
    metadata["annotations"] = _annotations(meta, template_hash)
    _add_finalizers(metadata, meta)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def _add_finalizers(metadata: dict[str, Any], meta: Mapping[str, Any]) -> None:
    """The template's finalizers, as KubeRay builds a pod from its template's whole metadata:
    one a user puts there (to keep pods for log collection, say) holds each pod
    (docs/design.md §3.1)."""
    finalizers = meta.get("finalizers")
    if isinstance(finalizers, list) and finalizers:
        metadata["finalizers"] = [str(f) for f in finalizers]


def _annotations(meta: Mapping[str, Any], template_hash: str) -> dict[str, str]:
    """The template's annotations, then ours: the template hash names what built the pod."""
    annotations = meta.get("annotations")
    out = (
        {str(k): str(v) for k, v in annotations.items()} if isinstance(annotations, Mapping) else {}
    )
    out[labels.POD_TEMPLATE_HASH_ANNOTATION] = template_hash
    return out


def build_head_pod(cluster: RayCluster, *, inject_probes: bool = True) -> dict[str, Any]:
    """``inject_probes=False`` is KubeRay's ``ENABLE_PROBES_INJECTION=false``."""
    head = cluster.spec.head_group_spec
    meta, spec = split_template(head.template)
    container = _ray_container(spec)
    defaults = dict(_HEAD_DEFAULTS)
    if autoscaling_enabled(cluster):
        defaults["no-monitor"] = "true"
    params = ray_start.start_params(
        _group_params(head.ray_start_params, head.resources, head.labels), container, defaults
    )
    start = ray_start.ray_start_command(params, head=True)
    _set_command(cluster, container, start)
    gcs = gcs_port(cluster)
    env.add_env(container, env.head_env(cluster.metadata.namespace, start, gcs))
    _add_metrics_port(container, params)
    _add_shared_memory(spec, container)
    if inject_probes:
        probes.add_probes(container, params, head=True, ray_version=cluster.spec.ray_version)
    if serves_rayservice(cluster):
        env.add_env(container, env.SERVING_ENV)
    if autoscaling_enabled(cluster):
        autoscaler.add_sidecar(cluster, spec)
    if autoscaler_v2(cluster):
        env.add_env(container, [("RAY_enable_autoscaler_v2", "true")])
        spec["restartPolicy"] = "Never"
    pod_labels = merge_labels(
        meta.get("labels"),
        {
            **base_labels(cluster, group=labels.HEAD_GROUP, node_type=labels.NODE_TYPE_HEAD),
            **rayservice_serve_label(cluster, head=True, multi_host=False),
        },
        default_labels(cluster),
    )
    head_pod = _pod(
        cluster,
        generate_name=names.head_generate_name(cluster.metadata.name),
        meta=meta,
        pod_labels=pod_labels,
        spec=spec,
        template_hash=head_template_hash(cluster),
    )
    # KubeRay's whole-spec hash, on the head as KubeRay puts it (docs/design.md §3.8).
    head_pod["metadata"]["annotations"][labels.UPGRADE_STRATEGY_RECREATE_HASH_ANNOTATION] = (
        recreate_hash(cluster)
    )
    return head_pod


def build_worker_pod(
    cluster: RayCluster,
    group: WorkerGroupSpec,
    *,
    replica_index: int | None,
    replica_name: str | None,
    host_index: int | None,
    indexing_labels: bool = True,
    inject_probes: bool = True,
) -> dict[str, Any]:
    """One worker pod of ``group``: host ``host_index`` of slice ``replica_index``.

    ``replica_index=None`` is accepted for single-host pods only (no index label; a TPU pod's
    ``TPU_NAME`` is then its own pod name, each host its own slice, as Ray assumes).
    ``indexing_labels=False`` (gate RayMultiHostIndexing off) leaves out the replica-index,
    replica-name and host-index labels, as KubeRay does; hostnames, env and placement of a
    multi-host group are still built from the given indices. ``inject_probes=False`` is
    KubeRay's ``ENABLE_PROBES_INJECTION=false``.
    """
    return WorkerPods(cluster, group, inject_probes=inject_probes).build(
        replica_index=replica_index,
        replica_name=replica_name,
        host_index=host_index,
        indexing_labels=indexing_labels,
    )


class _Start(NamedTuple):
    params: dict[str, str]
    #: The ray start command line.
    start: str
    #: The container's command and args, or None when the user's are kept.
    command: tuple[list[str], list[str]] | None


class WorkerPods:
    """The worker pods of one group, with what every pod shares computed once.

    A scale-up of a big group builds thousands of pods in one plan; re-deriving the
    accelerator profile, quantities, ray start flags and names for each of them dominated the
    plan. Everything here is a pure function of the cluster and the group, so a planner keeps
    one per group for the length of one plan; each pod it returns is a fresh object.
    """

    def __init__(
        self, cluster: RayCluster, group: WorkerGroupSpec, *, inject_probes: bool = True
    ) -> None:
        self.cluster = cluster
        self.group = group
        self.inject_probes = inject_probes
        self.profile = profile_for(group)
        #: A ComputeDomain per slice (docs/design.md §3.9): the Ray label names it.
        self.compute_domains = wants_compute_domains(group)
        self.template_hash = worker_template_hash(cluster, group)
        template = group.template
        meta = template.get("metadata")
        spec = template.get("spec")
        self._meta: Mapping[str, Any] = meta if isinstance(meta, Mapping) else {}
        self._spec: Mapping[str, Any] = spec if isinstance(spec, Mapping) else {}
        name = cluster.metadata.name
        self._multi = group.num_of_hosts > 1
        self._head = names.head_service_name(name)
        self._fqdn = head_fqdn(cluster)
        self._gcs = gcs_port(cluster)
        self._headless = names.headless_service_name(name)
        self._coordinator = (
            f"{names.host_name(group.group_name, 0, 0)}.{self._headless}" if self._multi else None
        )
        self._v2 = autoscaler_v2(cluster)
        self._params = _group_params(group.ray_start_params, group.resources, group.labels)
        self._labels = {
            **base_labels(cluster, group=group.group_name, node_type=labels.NODE_TYPE_WORKER),
            **rayservice_serve_label(cluster, head=False, multi_host=self._multi),
        }
        self._serving = serves_rayservice(cluster)
        self._defaults = default_labels(cluster)
        self._owner = owner_reference(cluster)
        self._generate_name = names.worker_generate_name(name, group.group_name)
        #: ray start flags and command by the pod's extra Ray labels (one entry for most
        #: groups; one per slice for NVLink groups, whose slice name is a Ray label).
        self._starts: dict[tuple[tuple[str, str], ...], _Start] = {}
        self._hostnames: dict[int, tuple[str, ...]] = {}

    def identity(
        self, replica_index: int | None, replica_name: str | None, host_index: int | None
    ) -> HostIdentity:
        group = self.group
        hosts = group.num_of_hosts
        if hosts > 1 and (host_index is None or replica_index is None):
            raise ValueError(
                f"group {group.group_name!r} has {hosts} hosts: replica_index and host_index "
                "are required"
            )
        hostnames: tuple[str, ...] = ()
        if hosts > 1 and replica_index is not None:
            hostnames = self._hostnames.get(replica_index, ())
            if not hostnames:
                hostnames = self._hostnames[replica_index] = tuple(
                    f"{names.host_name(group.group_name, replica_index, h)}.{self._headless}"
                    for h in range(hosts)
                )
        return HostIdentity(
            cluster=self.cluster.metadata.name,
            group=group.group_name,
            replica_index=replica_index or 0,
            replica_name=replica_name,
            host_index=host_index or 0,
            num_hosts=hosts,
            slice_name=""
            if replica_index is None
            else names.slice_name(group.group_name, replica_index),
            hostnames=hostnames,
            slice_id=""
            if replica_index is None or hosts <= 1
            else names.slice_id(
                self.cluster.metadata.namespace,
                self.cluster.metadata.name,
                group.group_name,
                replica_index,
            ),
        )

    def _start(self, container: Mapping[str, Any], ray_labels: Mapping[str, str]) -> _Start:
        """``container`` is the template's Ray container, not yet changed for this pod."""
        key = tuple(ray_labels.items())
        cached = self._starts.get(key)
        if cached is None:
            defaults = {**_WORKER_DEFAULTS, "address": f"{self._fqdn}:{self._gcs}"}
            params = ray_start.start_params(
                self._params, container, defaults, ray_labels=ray_labels
            )
            start = ray_start.ray_start_command(params, head=False)
            keep = overwrite_cmd(self.cluster) or "ray start" in ray_start.user_command(container)
            command = None if keep else ray_start.container_command(container, start)
            cached = self._starts[key] = _Start(params, start, command)
        return cached

    def build(
        self,
        *,
        replica_index: int | None,
        replica_name: str | None,
        host_index: int | None,
        indexing_labels: bool = True,
    ) -> dict[str, Any]:
        """One pod; see ``build_worker_pod``."""
        identity = self.identity(replica_index, replica_name, host_index)
        spec = _copy_json(self._spec)
        container = _ray_container(spec)
        positions = tpu_container_positions(spec["containers"])
        ray_position = positions.index(0) if 0 in positions else 0
        ray_labels = self.profile.ray_labels(
            identity, container_index=ray_position, tpu_containers=max(len(positions), 1)
        )
        if self.compute_domains and replica_name is not None and RAY_GPU_DOMAIN in ray_labels:
            domain = names.compute_domain_name(self.cluster.metadata.name, replica_name)
            ray_labels = {**ray_labels, RAY_GPU_DOMAIN: domain}
        params, start, command = self._start(container, ray_labels)
        if command is not None:  # as _set_command does
            container["command"], container["args"] = list(command[0]), list(command[1])
        self._add_env(spec, container, identity, start)
        self._shape_host(spec, container, identity, params)
        ours = dict(self._labels)
        if indexing_labels and replica_index is not None:
            ours[labels.REPLICA_INDEX] = str(replica_index)
            if self._multi:
                if replica_name is not None:
                    ours[labels.REPLICA_NAME] = replica_name
                ours[labels.HOST_INDEX] = str(identity.host_index)
        if self._multi:
            ours[labels.V1_REPLICA_INDEX] = identity.slice_name
            if identity.slice_id and self.profile.exclusive:
                ours[labels.SLICE_ID] = identity.slice_id
        metadata: dict[str, Any] = {
            "generateName": self._generate_name,
            "namespace": self.cluster.metadata.namespace,
            "labels": merge_labels(self._meta.get("labels"), ours, self._defaults),
            "ownerReferences": [dict(self._owner)],
        }
        metadata["annotations"] = _annotations(self._meta, self.template_hash)
        _add_finalizers(metadata, self._meta)
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}

    def _add_env(
        self,
        spec: dict[str, Any],
        container: dict[str, Any],
        identity: HostIdentity,
        start: str,
    ) -> None:
        """Ray's worker env, the multi-host env, and the accelerator's per-host env."""
        profile = self.profile
        present = env.env_names(container)
        env.add_env(
            container,
            env.worker_env(
                self.cluster.metadata.namespace, start, self._fqdn, self._head, self._gcs
            ),
            present=present,
        )
        if self._multi:
            env.add_env(container, env.multi_host_env(identity), present=present)
        # TPU env goes into every TPU container (on v7x each is its own TPU worker, with its
        # own id and port); the Ray container gets it even when it requests no chips itself.
        containers = spec["containers"]
        positions = tpu_container_positions(containers)
        ray_position = positions.index(0) if 0 in positions else 0
        env.add_env(
            container,
            profile.host_env(
                identity,
                present,
                megascale_coordinator=self._coordinator,
                container_index=ray_position,
                tpu_containers=max(len(positions), 1),
            ),
            present=present,
        )
        for index, position in enumerate(positions):
            if position == 0:
                continue
            other = containers[position]
            env.add_env(
                other,
                profile.host_env(
                    identity,
                    env.env_names(other),
                    megascale_coordinator=self._coordinator,
                    container_index=index,
                    tpu_containers=len(positions),
                ),
            )
        if profile.kind is AcceleratorKind.TPU and not identity.slice_name:
            env.add_env(container, [("TPU_NAME", env.field_ref("metadata.name"))], present=present)

    def _shape_host(
        self,
        spec: dict[str, Any],
        container: dict[str, Any],
        identity: HostIdentity,
        params: Mapping[str, str],
    ) -> None:
        """Hostname and subdomain (multi-host), placement, metrics port, shared memory."""
        if self._multi:
            spec["hostname"] = names.host_name(
                self.group.group_name, identity.replica_index, identity.host_index
            )
            spec["subdomain"] = self._headless
        placement = self.profile.placement(identity)
        if placement is not None:
            spec["affinity"] = merge_affinity(spec.get("affinity"), placement)
        _add_metrics_port(container, params)
        _add_shared_memory(spec, container)
        if self.inject_probes:
            ray_version = self.cluster.spec.ray_version
            # A host of a multi-host slice may hold no Serve replica, hence no proxy: its
            # readiness is the raylet's, and its proxy is the RayService controller's to ask
            # (docs/design.md §3.4c, §12 RS4).
            serving = self._serving and not self._multi
            probes.add_probes(
                container, params, head=False, ray_version=ray_version, serving=serving
            )
        if self._serving:
            env.add_env(container, env.SERVING_ENV)
        if self._v2:
            # Autoscaler v2 expects a dead Ray node's pod to stay dead so it can replace it.
            spec["restartPolicy"] = "Never"


def _copy_json(value: Any) -> Any:
    """A deep copy of JSON data (dicts, lists, scalars), several times faster than
    ``copy.deepcopy``, which must also handle cycles and arbitrary objects."""
    if isinstance(value, dict | Mapping):
        return {k: _copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_json(v) for v in value]
    return value
