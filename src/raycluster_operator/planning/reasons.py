"""Why the operator creates or deletes a pod, as named values.

A user whose slice went away asks "why?"; the answer must be the same word in the Event, the
log line, the metric label and the status condition. So every decision carries one of these
values, and their string values are the CamelCase Event reasons Kubernetes users expect.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple


class DeleteReason(StrEnum):
    #: A multi-host replica lacks a pod for some host index (a partial create, a lost pod).
    REPLICA_INCOMPLETE = "ReplicaIncomplete"
    #: A pod of the replica failed (phase Failed/Succeeded, or the Ray container exited with
    #: restartPolicy Never): the whole replica goes.
    HOST_FAILED = "HostFailed"
    #: A pod of the replica is terminating (evicted, deleted by hand): the rest of it goes too.
    HOST_TERMINATING = "HostTerminating"
    #: Two live pods of one replica claim the same host index.
    DUPLICATE_HOST = "DuplicateHost"
    #: The replica was built for another numOfHosts (too many pods, a host index out of range,
    #: multi-host labels on a now single-host group).
    REPLICA_SHAPE_CHANGED = "ReplicaShapeChanged"
    #: Pods sharing a replica name disagree on (or lack) the replica index or host index.
    INCONSISTENT_REPLICA_LABELS = "InconsistentReplicaLabels"
    #: Two complete replicas share a replica index; the newer one goes.
    DUPLICATE_REPLICA_INDEX = "DuplicateReplicaIndex"
    #: A pod of the group without the identity labels the gate requires (made before the gate
    #: was on, or by another operator); replaced, never left behind.
    POD_WITHOUT_REPLICA_IDENTITY = "PodWithoutReplicaIdentity"
    #: Named in scaleStrategy.workersToDelete (by the autoscaler); takes its whole replica.
    WORKERS_TO_DELETE = "WorkersToDelete"
    #: More replicas than desired (autoscaling off): the highest indices go first.
    SCALE_DOWN = "ScaleDown"
    GROUP_SUSPENDED = "GroupSuspended"
    CLUSTER_SUSPENDED = "ClusterSuspended"
    #: The RayCluster was deleted with Ray's idle-termination finalizer: its pods go before
    #: the finalizer is released.
    CLUSTER_DELETING = "ClusterDeleting"
    #: A pod of a worker group that is no longer in the spec.
    GROUP_REMOVED = "GroupRemoved"
    HEAD_FAILED = "HeadFailed"
    #: More than one live head pod; the oldest is kept.
    DUPLICATE_HEAD = "DuplicateHead"
    #: Gate RayMultiHostIndexing off: a single pod failed and is replaced on its own.
    POD_FAILED = "PodFailed"
    # -- host loss (planning/features/host_loss.py, docs/design.md §4 rules 8a and 8b) --
    #: A host's node is NotReady/Unknown or tainted unreachable/not-ready NoExecute: the
    #: slice is replaced at once, without waiting for Kubernetes' eviction.
    HOST_LOST = "HostLost"
    #: A host that had been Ready has not been Ready for longer than --unready-slice-timeout.
    HOST_UNREADY = "HostUnready"
    #: Upgrades (docs/design.md §4, rule 12a): the slice (or head) was built from an older
    #: template than the spec's, and the upgrade strategy replaces it now.
    TEMPLATE_CHANGED = "TemplateChanged"
    #: The hosts of one slice carry two template hashes: it cannot be one Ray/JAX slice.
    MIXED_TEMPLATES = "MixedTemplates"
    #: Rule 13b: the ComputeDomain the slice's pods claim channels from is gone (deleted under
    #: the slice, or its creation failed): without it the hosts share no NVLink, so the slice
    #: is replaced whole, with a fresh domain.
    COMPUTE_DOMAIN_LOST = "ComputeDomainLost"
    # -- planned disruptions (planning/features/disruption.py, docs/design.md §4 rule 12b) --
    #: A host's node is cordoned (``kubectl drain`` cordons first): the slice is moved whole.
    NODE_DRAIN = "NodeDrain"
    #: A host's node is tainted ToBeDeletedByClusterAutoscaler (a scale-down drains it).
    NODE_SCALE_DOWN = "NodeScaleDown"
    #: A host's node is tainted cloud.google.com/impending-node-termination (GKE).
    NODE_TERMINATION = "NodeTermination"
    #: A host's node announces a host maintenance (cloud.google.com/scheduled-maintenance-time)
    #: inside the maintenance window.
    HOST_MAINTENANCE = "HostMaintenance"
    #: A host of a disrupted slice was evicted (its budget was released because no stand-in
    #: could be placed): the rest of the slice goes with it.
    SLICE_EVICTED = "SliceEvicted"

    @property
    def is_warning(self) -> bool:
        """Something went wrong (Warning Event) rather than something was asked for (Normal)."""
        return self not in _REQUESTED


_REQUESTED = frozenset(
    {
        DeleteReason.WORKERS_TO_DELETE,
        DeleteReason.SCALE_DOWN,
        DeleteReason.GROUP_SUSPENDED,
        DeleteReason.CLUSTER_SUSPENDED,
        DeleteReason.CLUSTER_DELETING,
        DeleteReason.GROUP_REMOVED,
        DeleteReason.TEMPLATE_CHANGED,
        DeleteReason.NODE_DRAIN,
        DeleteReason.NODE_SCALE_DOWN,
        DeleteReason.NODE_TERMINATION,
        DeleteReason.HOST_MAINTENANCE,
        DeleteReason.SLICE_EVICTED,
    }
)

#: Planned disruptions (rule 12b): why a slice is moved off its nodes.
DISRUPTION_REASONS = frozenset(
    {
        DeleteReason.NODE_DRAIN,
        DeleteReason.NODE_SCALE_DOWN,
        DeleteReason.NODE_TERMINATION,
        DeleteReason.HOST_MAINTENANCE,
    }
)

#: Reasons that mean a replica was broken; the RayClusterReplicaFailure condition reports them.
BROKEN_REASONS = frozenset(DeleteReason) - _REQUESTED


class CreateReason(StrEnum):
    #: Fewer replicas than desired.
    SCALE_UP = "ScaleUp"
    #: Stands in for a replica deleted in the same pass because it was broken.
    REPLACE_REPLICA = "ReplaceReplica"
    #: No live head pod.
    HEAD_MISSING = "HeadMissing"
    #: A slice of the current template made by a rolling upgrade (a surge slice, or the
    #: stand-in for an outdated slice deleted in the same pass).
    UPGRADE = "Upgrade"
    # -- crash-loop backoff (planning/features/backoff.py, docs/design.md §4 rule 13a) --
    #: The backoff of a slice that kept breaking is over: it is tried again at its index.
    BACKOFF_RETRY = "BackoffRetry"
    #: The group's template changed since the slice broke: its backoff ends at once.
    TEMPLATE_FIXED = "TemplateFixed"
    #: A stand-in for a slice a planned disruption takes (rule 12b), placed off its nodes.
    SLICE_MOVE = "SliceMove"


class EventReason(StrEnum):
    """Events about the cluster as a whole, not about one pod created or deleted."""

    #: The spec breaks a rule; the part it names is left alone until it is fixed.
    INVALID_SPEC = "InvalidSpec"
    #: Every replica name drawn for a new multi-host replica was taken; retried next pass.
    REPLICA_NAME_COLLISION = "ReplicaNameCollision"
    #: Another controller's pods showed up in a cluster we manage: we stand back (rule 2a).
    CONTROLLER_CONFLICT = "ControllerConflict"
    #: A group wants a ComputeDomain per slice but the cluster does not serve ComputeDomains
    #: (NVIDIA's DRA driver is not installed): its slices run without IMEX channels (13b).
    COMPUTE_DOMAINS_UNAVAILABLE = "ComputeDomainsUnavailable"
    #: A TPU group that Ray's slice reservations cannot scale, and why (rule 7b); once per
    #: applied generation of the spec.
    SLICE_RESERVATIONS_CANNOT_SCALE = "SliceReservationsCannotScale"
    #: The spec sets KubeRay fields this operator accepts and does not act on (rule 3a); once
    #: per change of the list.
    UNSUPPORTED_FIELD = "UnsupportedField"
    #: Pods carry the cluster's label but no controller of it made them (rule 2b); once per
    #: change of the list.
    STRAY_PODS = "StrayPods"
    #: A user's PodDisruptionBudget selects pods of a multi-host group the operator keeps
    #: per-slice budgets for (rule 12b): it stands back; once per new overlap.
    DISRUPTION_BUDGET_OVERLAP = "DisruptionBudgetOverlap"


class HoldReason(StrEnum):
    """Why the planner holds back a slice it would otherwise create
    (planning/features/backoff.py)."""

    #: The slice at this index broke again soon after it was recreated: its re-creation waits
    #: out an exponential backoff (docs/design.md §4 rule 13a).
    SLICE_BACKOFF = "SliceBackoff"
    #: The slice does not fit the namespace's ResourceQuotas (or the API refused one of its
    #: pods for quota in a race): it waits until quota frees (docs/design.md §4 rule 13c).
    SLICE_QUOTA_EXCEEDED = "SliceQuotaExceeded"
    #: The API refused a pod of the slice as built (Pod Security, a LimitRange, a quota's
    #: `must specify`): a spec problem, retried when the template changes or after a wait.
    POD_REJECTED = "PodRejected"
    #: The namespace's ServiceAccount does not exist yet (kube-controller-manager makes
    #: `default` moments after the namespace): a race like quota's, retried soon.
    SERVICE_ACCOUNT_PENDING = "ServiceAccountPending"


#: Every reason an Event of the operator may carry.
Reason = CreateReason | DeleteReason | EventReason | HoldReason


class ConditionReason(StrEnum):
    """``reason`` of the status conditions (KubeRay's words where KubeRay has the condition).

    RayClusterReplicaFailure's reason is the ``DeleteReason`` of the worst failure instead.
    """

    HEAD_POD_RUNNING_AND_READY = "HeadPodRunningAndReady"
    HEAD_POD_NOT_FOUND = "HeadPodNotFound"
    HEAD_POD_NOT_READY = "HeadPodNotReady"
    ALL_PODS_READY_FIRST_TIME = "AllPodRunningAndReadyFirstTime"
    PODS_PROVISIONING = "RayClusterPodsProvisioning"
    SUSPENDED = "RayClusterSuspended"
    NO_REPLICA_FAILURE = "NoReplicaFailure"
    SUSPENDING = "RayClusterSuspending"
    INVALID_SPEC = "InvalidSpec"
    SPEC_VALID = "SpecValid"
    #: Ours, condition RollingUpdate (docs/design.md §6): pods of an older template remain
    #: and are being replaced; held while the cluster is suspended; none remain.
    ROLLOUT_PROGRESSING = "Progressing"
    ROLLOUT_PAUSED = "Paused"
    ROLLOUT_COMPLETE = "Complete"
    #: Ours, condition SliceQuotaExceeded (docs/design.md §4 rule 13c): slices wait for
    #: quota, or a pod of the group was refused as built; none waits any more.
    SLICE_QUOTA_EXCEEDED = "SliceQuotaExceeded"
    POD_REJECTED = "PodRejected"
    QUOTA_AVAILABLE = "QuotaAvailable"
    #: Ours, condition UnsupportedFields (docs/design.md §4 rule 3a): the spec sets fields
    #: the operator does not act on; it no longer does.
    UNSUPPORTED_FIELDS = "UnsupportedFields"
    ALL_FIELDS_SUPPORTED = "AllFieldsSupported"
    #: Ours, condition StrayPods (docs/design.md §4 rule 2b): pods carry the cluster's label
    #: but no controller of it made them; none is live any more.
    STRAY_PODS = "StrayPods"
    NO_STRAY_PODS = "NoStrayPods"
    #: Ours, condition DisruptionBudgetOverlap (docs/design.md §4 rule 12b): a user's
    #: PodDisruptionBudget selects pods of a group with per-slice budgets; none does any more.
    DISRUPTION_BUDGET_OVERLAP = "DisruptionBudgetOverlap"
    NO_DISRUPTION_BUDGET_OVERLAP = "NoDisruptionBudgetOverlap"
    #: KubeRay's, condition ReplicaFailure (docs/design.md §6): which pod's create the API
    #: refused (or would refuse: a slice held for quota, rule 13c).
    FAILED_CREATE_HEAD_POD = "FailedCreateHeadPod"
    FAILED_CREATE_WORKER_POD = "FailedCreateWorkerPod"


class ConditionType(StrEnum):
    """Condition types: KubeRay's where KubeRay has one, ours otherwise."""

    HEAD_POD_READY = "HeadPodReady"
    PROVISIONED = "RayClusterProvisioned"
    #: Ours despite the name (KubeRay's Go constant; its string is ``ReplicaFailure``):
    #: broken replicas being deleted, False (``NoReplicaFailure``) when none.
    REPLICA_FAILURE = "RayClusterReplicaFailure"
    #: KubeRay's: True while a pod create is refused (rule 13c: a slice waiting for quota or
    #: refused as built), absent otherwise, as KubeRay removes it (docs/design.md §6).
    KUBERAY_REPLICA_FAILURE = "ReplicaFailure"
    SUSPENDING = "RayClusterSuspending"
    SUSPENDED = "RayClusterSuspended"
    #: Ours: validation problems; the affected part of the cluster is left untouched.
    INVALID_SPEC = "InvalidSpec"
    #: Ours, with upgradeStrategy RollingUpdate only: True while pods of an older template
    #: remain (Progressing, or Paused while suspended), False once none do (Complete).
    ROLLING_UPDATE = "RollingUpdate"
    #: Ours (rule 13c): True while slices are not created because they do not fit the
    #: namespace's quotas (or a pod of their group was refused); present once it has been.
    SLICE_QUOTA_EXCEEDED = "SliceQuotaExceeded"
    #: Ours (rule 3a): True while the spec sets KubeRay fields the operator does not act on;
    #: present once it has been.
    UNSUPPORTED_FIELDS = "UnsupportedFields"
    #: Ours (rule 2b): True while live pods carry the cluster's label that no controller of
    #: it made (they are left alone); present once it has been.
    STRAY_PODS = "StrayPods"
    #: Ours (rule 12b): True while a user's PodDisruptionBudget selects pods of a multi-host
    #: group, whose per-slice budgets the operator then does not keep; present once it has been.
    DISRUPTION_BUDGET_OVERLAP = "DisruptionBudgetOverlap"


class Condition(NamedTuple):
    """One status condition as a pass sees it (the status builder adds its
    ``lastTransitionTime``): the planner's own, or a lifecycle feature's ``conditions()``. A
    feature may name a type and reason of its own; the enums above are plain strings too."""

    type: str
    status: bool
    reason: str
    message: str = ""
