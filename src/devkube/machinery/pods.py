"""Facts of the Pod API that the scheduler, the kubelet and the controllers all read the same
way, kept here so that none of them borrows them from another (docs/design.md §8)."""

from __future__ import annotations

#: Phases a pod never leaves: its containers are done and nothing restarts them.
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})

#: Names a generated ResourceClaim's entry in its pod (kube-controller-manager writes it, the
#: scheduler reads it).
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
