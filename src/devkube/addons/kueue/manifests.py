"""Kueue's install manifests, read from the release's own `config/components` in the Go module
cache and changed only where a local process differs from the Deployment they were written for
(docs/design.md §8.4).

What kustomize's `config/default` does to them is redone here: every name gets the `kueue-`
prefix and every namespaced object lands in `kueue-system`. Then, since Kueue is no pod and
there is no kube-proxy to reach a Service: the webhooks and the CRDs' conversion webhooks call
`url: https://127.0.0.1:<port>/...`, trusting the cluster CA that signed the server's
certificate, instead of naming `kueue-webhook-service`.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from devkube.nodes import TPU_TOPOLOGY_LEVELS

NAMESPACE = "kueue-system"
PREFIX = "kueue-"
SERVICE_ACCOUNT = f"{PREFIX}controller-manager"
#: The integrations turned on: ours are KubeRay's kinds.
FRAMEWORKS = ("ray.io/rayjob", "ray.io/raycluster")
#: Kueue's alpha gate for elastic jobs: a RayCluster annotated `kueue.x-k8s.io/elastic-job:
#: "true"` may autoscale, each change of size admitted as a new workload slice (docs/design.md
#: §8.4). Off in Kueue v0.17.0 by default; on here, as `kueue_slices` proves it.
FEATURE_GATES: tuple[tuple[str, bool], ...] = (("ElasticJobsViaWorkloadSlices", True),)
#: The Topology the dev cluster ships: GKE's placement labels on the simulated TPU nodes
#: (block, sub-block, host, then the node), for a ResourceFlavor's `topologyName`.
TOPOLOGY = "gke-tpu"
#: Webhook paths of Kueue's own kinds (always on) and of the frameworks above.
_OWN_KINDS = "-kueue-x-k8s-io-"
_FRAMEWORK_PATHS = ("-ray-io-v1-rayjob", "-ray-io-v1-raycluster")

Obj = dict[str, Any]


def _documents(path: Path) -> list[Obj]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _kustomized_resources(folder: Path) -> list[Path]:
    listed = yaml.safe_load((folder / "kustomization.yaml").read_text())
    return [folder / name for name in listed.get("resources", [])]


def crds(components: Path, *, url: str, ca_pem: bytes) -> list[Obj]:
    """Every CRD `config/components/crd` lists, with the conversion webhook its patches turn on
    pointed at `url` + /convert."""
    folder = components / "crd"
    converted = {
        doc["metadata"]["name"]
        for patch in yaml.safe_load((folder / "kustomization.yaml").read_text())["patches"]
        for doc in _documents(folder / patch["path"])
    }
    out = []
    for path in _kustomized_resources(folder):
        for crd in _documents(path):
            if crd["metadata"]["name"] in converted:
                crd["spec"]["conversion"] = {
                    "strategy": "Webhook",
                    "webhook": {
                        "clientConfig": _client_config(url, "/convert", ca_pem),
                        "conversionReviewVersions": ["v1"],
                    },
                }
            out.append(crd)
    return out


def rbac(components: Path) -> list[Obj]:
    """`config/components/rbac`, prefixed and namespaced as `config/default` does."""
    return [
        _kustomize(doc)
        for path in _kustomized_resources(components / "rbac")
        for doc in _documents(path)
    ]


def _kustomize(doc: Obj) -> Obj:
    doc = copy.deepcopy(doc)
    meta = doc["metadata"]
    meta["name"] = PREFIX + meta["name"]
    if "namespace" in meta:
        meta["namespace"] = NAMESPACE
    if "roleRef" in doc:
        doc["roleRef"]["name"] = PREFIX + doc["roleRef"]["name"]
    for subject in doc.get("subjects", []):
        if subject.get("kind") == "ServiceAccount":
            subject["name"] = PREFIX + subject["name"]
            subject["namespace"] = NAMESPACE
    return doc


def webhooks(components: Path, *, url: str, ca_pem: bytes) -> list[Obj]:
    """The Mutating/ValidatingWebhookConfigurations, keeping the webhooks of Kueue's own kinds
    and of `FRAMEWORKS` (a disabled integration's webhook would only add a call to every
    create of its kind, pods included), each calling `url` + its path."""
    out = []
    for doc in _documents(components / "webhook" / "manifests.yaml"):
        doc = copy.deepcopy(doc)
        doc["metadata"]["name"] = PREFIX + doc["metadata"]["name"]
        kept = []
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            if _OWN_KINDS in path or path.endswith(_FRAMEWORK_PATHS):
                hook["clientConfig"] = _client_config(url, path, ca_pem)
                kept.append(hook)
        doc["webhooks"] = kept
        out.append(doc)
    return out


def _client_config(url: str, path: str, ca_pem: bytes) -> Obj:
    return {"url": url + path, "caBundle": base64.b64encode(ca_pem).decode()}


def configuration(
    *,
    webhook_port: int,
    cert_dir: Path,
    health_port: int,
    frameworks: Sequence[str] = FRAMEWORKS,
    feature_gates: Iterable[tuple[str, bool]] = FEATURE_GATES,
) -> Obj:
    """The manager's Configuration: `config/components/manager`'s, less what a pod has and a
    process has not. Internal certificate management is off (kube-apiserver trusts the
    cluster CA, which signed the certificate in `cert_dir`); no leader election (one
    process); metrics off, health and webhooks on loopback ports of their own (tests run
    side by side); the visibility API server off (it would need an APIService and a
    Service to be reached)."""
    gates = {"VisibilityOnDemand": False, **dict(feature_gates)}
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "clientConnection": {"qps": 100, "burst": 200},
        "integrations": {"frameworks": list(frameworks)},
        "featureGates": gates,
    }


def topology() -> Obj:
    """The `Topology` of the simulated TPU nodes (devkube.nodes), coarsest level first; a
    ResourceFlavor naming it turns Topology Aware Scheduling on for its quota."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": {"name": TOPOLOGY},
        "spec": {"levels": [{"nodeLabel": label} for label in TPU_TOPOLOGY_LEVELS]},
    }
