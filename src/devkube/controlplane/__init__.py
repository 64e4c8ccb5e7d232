"""Kubernetes' own control plane for the dev cluster (`DevCluster(control_plane="kubernetes")`,
`raycluster-operator dev --control-plane kubernetes`): its binaries built from the Go module
proxy at pinned versions (`build`), started as kubeadm starts them (`kube`). docs/design.md
§8.2."""

from devkube.controlplane.build import BuildError, ensure_built
from devkube.controlplane.kube import ControlPlaneError, KubeControlPlane

__all__ = ["BuildError", "ControlPlaneError", "KubeControlPlane", "ensure_built"]
