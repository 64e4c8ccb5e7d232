"""Ray's in-tree autoscaler with the slice-scaling correction (docs/design.md, rule 7b).

This is the autoscaler sidecar's program. It runs Ray's own ``run_kuberay_autoscaler``
(what ``ray kuberay-autoscaler`` runs), unforked, after correcting what in Ray 2.60's KubeRay
support keeps ``ray.util.tpu.slice_placement_group`` (and Ray Train's JaxTrainer, which
reserves slices the same way) from scaling multi-host slices, and buys a slice per lost host:

1. **Node-type labels.** ``reserve_tpu_slice`` asks for ``{TPU-<pod type>-head: 1}`` with the
   label selector ``ray.io/tpu-worker-id=0, ray.io/tpu-pod-type=<pod type>``. Autoscaler v2
   launches only node types whose labels satisfy a selector, and KubeRay's config producer
   takes a node type's labels from the group spec's ``labels`` field, which a TPU group does
   not carry. A node type that already has the ``TPU-<pod type>-head`` resource (KubeRay's
   producer adds it from the GKE TPU nodeSelectors) is a slice: a launch of it brings a
   slice whose worker 0 carries exactly those labels. The correction adds them to that node
   type when the group does not set them. Upstream fix: the config producer derives the TPU
   labels alongside the head resource.
2. **Replica rounding.** ``KubeRayProvider`` turns a node count into slices with
   ``pods // numOfHosts``: a launch of one node (a slice head) on a group of 2-host slices is
   floored away. The correction rounds a *launch* up to whole slices; terminations are left
   as Ray computes them (one host going takes its slice down, which is right). Upstream fix:
   ``ceil`` for launches in ``_submit_scale_request``/``_initialize_scale_request``.

3. **Idle termination by slice.** The v2 scheduler terminates idle *nodes*: while a slice
   reservation holds only a slice's head (``SlicePlacementGroup`` reserves every slice's head
   before it places the hosts), the slice's other hosts are idle, and once past
   ``idleTimeoutSeconds`` one is terminated, which takes its whole slice (and the reserved
   head) down: the reservation churns. The correction keeps an idle node whose slice (same
   ``ray.io/tpu-slice-name`` or ``ray.io/gpu-domain``) still has a host that is not being
   terminated; a slice goes when all its hosts are idle, together. Ray's termination order
   is grouped by slice for the same pass, so that with ``minReplicas`` > 0 the terminations
   Ray allows above ``min_worker_nodes`` fall on whole slices (ungrouped, two idle slices
   would each lose one host to the budget, both kept whole, and never scale down). Upstream
   fix: idle termination at the granularity of a node type's launch unit.
4. **The minimum is the operator's.** The v2 scheduler launches nodes while it counts fewer
   than a node type's ``min_worker_nodes``, and it counts the non-terminating pods it sees.
   ``KubeRayProvider`` adds a launch on top of ``max(replicas, minReplicas) * numOfHosts``,
   a count the operator already keeps alive; so a min-count launch always buys more than
   the minimum. It fires whenever a slice is being replaced: after a lost host the operator
   deletes the slice whole and recreates it once no pod carries its index (the provider
   skips terminating pods), and a pass in that window saw no worker, launched a slice, and
   ``replicas`` went 1 -> 2 (issue 38). The correction skips that launch: the operator
   holds ``minReplicas`` itself (KubeRay's clamp), whatever Ray sees. Ray's other use of the
   minimum (no idle termination below it) is untouched. Upstream fix: the KubeRay provider
   counts ``max(replicas, minReplicas)`` as the min-count baseline, or v2 leaves the minimum
   to KubeRay.

All are applied only to the Ray versions they were written and tested against
(``CORRECTED_VERSIONS``); any other version, or a Ray whose wrapped internals moved, runs
Ray's autoscaler untouched, with a log line saying so. Standard library and Ray only: the
builders embed this file in the sidecar's command (the user's Ray image does not have the
operator's package).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

#: Ray versions whose autoscaler this correction was read against and is tested with.
CORRECTED_VERSIONS = ("2.60.",)
TPU_HEAD_RESOURCE = re.compile(r"TPU-(?P<pod_type>.+)-head")
WORKER_ID_LABEL = "ray.io/tpu-worker-id"
#: Ray node labels that name a node's slice (TPU) or NVLink domain (GPU), set by the operator.
SLICE_LABELS = ("ray.io/tpu-slice-name", "ray.io/gpu-domain")
POD_TYPE_LABEL = "ray.io/tpu-pod-type"
MARK = "raycluster-operator slice scaling:"


def corrected(version: str) -> bool:
    return version.startswith(CORRECTED_VERSIONS)


def add_slice_head_labels(config: MutableMapping[str, Any]) -> dict[str, dict[str, str]]:
    """Give every slice node type the labels of its slice's worker 0, unless the group sets
    them itself. Returns the labels added, by node type."""
    added: dict[str, dict[str, str]] = {}
    node_types = config.get("available_node_types")
    if not isinstance(node_types, Mapping):
        return added
    for name, node_type in node_types.items():
        if not isinstance(node_type, MutableMapping):
            continue
        resources = node_type.get("resources")
        pod_types = [
            match.group("pod_type")
            for key in (resources if isinstance(resources, Mapping) else {})
            if (match := TPU_HEAD_RESOURCE.fullmatch(str(key)))
        ]
        if len(pod_types) != 1:
            continue
        current = node_type.get("labels")
        labels = dict(current) if isinstance(current, Mapping) else {}
        wanted = {POD_TYPE_LABEL: pod_types[0], WORKER_ID_LABEL: "0"}
        new = {k: v for k, v in wanted.items() if k not in labels}
        if new:
            node_type["labels"] = {**labels, **new}
            added[str(name)] = new
    return added


def hosts_by_group(ray_cluster: Mapping[str, Any]) -> dict[str, int]:
    spec = ray_cluster.get("spec")
    groups = spec.get("workerGroupSpecs") if isinstance(spec, Mapping) else None
    out: dict[str, int] = {}
    for group in groups if isinstance(groups, list) else []:
        if isinstance(group, Mapping) and isinstance(group.get("groupName"), str):
            hosts = group.get("numOfHosts", 1)
            out[group["groupName"]] = hosts if isinstance(hosts, int) and hosts > 0 else 1
    return out


def round_launches_up(
    desired: MutableMapping[str, int], to_launch: Mapping[str, int], hosts: Mapping[str, int]
) -> None:
    """Round the desired pod count of every group being launched up to whole slices."""
    for node_type, count in to_launch.items():
        per_slice = hosts.get(node_type, 1)
        if count > 0 and per_slice > 1 and node_type in desired:
            desired[node_type] = -(-desired[node_type] // per_slice) * per_slice


def _slice_of(node: Any) -> tuple[str, str] | None:
    labels = getattr(node, "labels", None) or {}
    for key in SLICE_LABELS:
        if labels.get(key):
            return (str(getattr(node, "node_type", "")), str(labels[key]))
    return None


def keep_slices_whole(
    nodes: list[Any], marked: set[str], to_terminate: Any, schedulable: Any
) -> list[Any]:
    """Undo this pass's idle terminations (``marked``: instance ids newly set to
    ``to_terminate``) of nodes whose slice has a host that stays; returns the nodes kept."""
    staying = {key for n in nodes if n.status != to_terminate and (key := _slice_of(n)) is not None}
    kept = []
    for node in nodes:
        if node.im_instance_id in marked and _slice_of(node) in staying:
            node.status = schedulable
            node.termination_request = None
            kept.append(node)
    return kept


def slice_order(nodes: list[Any], key: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Ray's termination order (``key``), with the hosts of a slice kept together: a slice
    sorts as its least terminable host, so a pass that stops at ``min_worker_nodes`` has
    spent its budget on whole slices, never on one host of each (which ``keep_slices_whole``
    would then keep, all of them, on every pass)."""
    worst: dict[tuple[str, str], Any] = {}
    for node in nodes:
        if (key_of_slice := _slice_of(node)) is not None:
            mine = key(node)
            worst[key_of_slice] = max(worst.get(key_of_slice, mine), mine)

    def order(node: Any) -> Any:
        mine = key(node)
        slice_key = _slice_of(node)
        if slice_key is None or slice_key not in worst:
            return (mine, "", mine)
        return (worst[slice_key], "/".join(slice_key), mine)

    return order


def _ray_internals() -> tuple[Any, Any, Any, Any]:
    """The Ray classes the correction wraps (ImportError/AttributeError if they moved)."""
    from ray.autoscaler._private.kuberay.autoscaling_config import AutoscalingConfigProducer
    from ray.autoscaler.v2.instance_manager.cloud_providers.kuberay.cloud_provider import (
        KubeRayProvider,
    )
    from ray.autoscaler.v2.scheduler import ResourceDemandScheduler, SchedulingNodeStatus

    for owner, name in (
        (AutoscalingConfigProducer, "__call__"),
        (KubeRayProvider, "_initialize_scale_request"),
        (ResourceDemandScheduler, "_enforce_idle_termination"),
        (ResourceDemandScheduler, "_sort_nodes_for_termination"),
        (ResourceDemandScheduler, "_enforce_min_workers_per_type"),
    ):
        getattr(owner, name)
    return AutoscalingConfigProducer, KubeRayProvider, ResourceDemandScheduler, SchedulingNodeStatus


def install() -> bool:
    """Apply the correction to the imported Ray, if its version is one it was written for.
    Any other version, or Ray's internals not where they were, runs Ray untouched (logged)."""
    import ray

    if not corrected(ray.__version__):
        print(
            f"{MARK} not applied: written for Ray {CORRECTED_VERSIONS}, this is {ray.__version__}"
        )
        return False
    try:
        producer, provider, scheduler, status = _ray_internals()
    except (ImportError, AttributeError) as error:
        print(f"{MARK} not applied: Ray {ray.__version__} lacks what it wraps ({error!r})")
        return False
    if getattr(producer, "_slice_scaling", False):
        return True
    _wrap(producer, provider, scheduler, status)
    print(
        f"{MARK} applied to Ray {ray.__version__} "
        "(slice-head labels, whole-slice launches, idle termination by slice, "
        "the minimum left to the operator)"
    )
    return True


def _wrap(producer: Any, provider: Any, scheduler: Any, status: Any) -> None:
    produce: Callable[..., Any] = producer.__call__
    initialize: Callable[..., Any] = provider._initialize_scale_request
    enforce_idle: Callable[..., Any] = scheduler._enforce_idle_termination
    rays_order: Callable[[Any], Any] = scheduler._sort_nodes_for_termination
    terminate = status.TO_TERMINATE
    schedulable = status.SCHEDULABLE

    def produce_with_labels(self: Any) -> Any:
        config = produce(self)
        add_slice_head_labels(config)
        return config

    def initialize_whole_slices(self: Any, to_launch: Any, to_delete_instances: Any) -> Any:
        request = initialize(self, to_launch, to_delete_instances)
        round_launches_up(request.desired_num_workers, to_launch, hosts_by_group(self.ray_cluster))
        return request

    def enforce_idle_by_slice(ctx: Any) -> None:
        nodes = ctx.get_nodes()
        before = {n.im_instance_id for n in nodes if n.status == terminate}
        # Ray reads its order from the class during this call only (one autoscaler loop).
        order = staticmethod(slice_order(nodes, rays_order))
        setattr(scheduler, "_sort_nodes_for_termination", order)  # noqa: B010
        try:
            enforce_idle(ctx)
        finally:
            setattr(scheduler, "_sort_nodes_for_termination", staticmethod(rays_order))  # noqa: B010
        nodes = ctx.get_nodes()
        marked = {n.im_instance_id for n in nodes if n.status == terminate} - before
        if marked and keep_slices_whole(nodes, marked, terminate, schedulable):
            ctx.update(nodes)

    def minimum_left_to_the_operator(ctx: Any) -> None:
        """Launch nothing for ``min_worker_nodes``: the operator keeps the minimum."""

    setattr(scheduler, "_enforce_idle_termination", staticmethod(enforce_idle_by_slice))  # noqa: B010
    setattr(  # noqa: B010
        scheduler, "_enforce_min_workers_per_type", staticmethod(minimum_left_to_the_operator)
    )
    setattr(producer, "__call__", produce_with_labels)  # noqa: B010
    setattr(provider, "_initialize_scale_request", initialize_whole_slices)  # noqa: B010
    setattr(producer, "_slice_scaling", True)  # noqa: B010


def main(argv: list[str]) -> None:
    """The arguments of ``ray kuberay-autoscaler``."""
    parser = argparse.ArgumentParser(prog="slice_autoscaler")
    parser.add_argument("--cluster-name", required=True)
    parser.add_argument("--cluster-namespace", required=True)
    parser.add_argument("--gcs-address", default=None)
    args = parser.parse_args(argv)
    install()
    sys.stdout.flush()
    from ray.autoscaler._private.kuberay.run_autoscaler import run_kuberay_autoscaler

    run_kuberay_autoscaler(args.cluster_name, args.cluster_namespace, args.gcs_address)


if __name__ == "__main__":
    main(sys.argv[1:])
