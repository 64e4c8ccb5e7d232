"""What a platform engineer applies to install the operator: RBAC, a Deployment.

Least privilege, derived from what the controller does (docs/design.md §3.6): read RayClusters and
write only their status; create/delete pods; create services and the autoscaler's service
account, role and binding; write Events and its Lease. Kubernetes lets a subject create a Role
only with permissions it holds itself, so the operator also holds the ones the Ray autoscaler's
Role grants beyond that (patch pods and pods/resize for in-place resize, delete rayclusters
for idle termination); the RayJob controller uses the last (and creates RayClusters and
submitter Jobs, ``rayjob_rules``). It patches a RayCluster's metadata only to release
Ray's idle-termination finalizer and to keep the crash-loop backoff's annotation (§4 rule 13a).
Where NVIDIA's DRA driver is installed it creates and deletes a ComputeDomain per GB200/GB300
slice (§3.9).
"""

from __future__ import annotations

from raycluster_operator.api.objects import Obj
from raycluster_operator.planning import lifecycle
from raycluster_operator.planning.feature import Rule

NAME = "raycluster-operator"
DEFAULT_IMAGE = "ghcr.io/raycluster-operator/raycluster-operator:0.1.0"
LABELS = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/component": "controller"}


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> Obj:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


def operator_rules() -> list[Obj]:
    """The watched and written kinds, in every namespace the operator serves."""
    return [
        # patch: releasing Ray's idle-termination finalizer, the backoff annotation (metadata,
        # never spec).
        _rule(["ray.io"], ["rayclusters"], ["get", "list", "watch", "patch"]),
        _rule(["ray.io"], ["rayclusters/status"], ["patch"]),
        _rule([""], ["pods"], ["get", "list", "watch", "create", "delete", "patch"]),
        _rule([""], ["services"], ["list", "watch", "create"]),
        # list/watch: a deleted autoscaler ServiceAccount/Role/RoleBinding is recreated.
        _rule([""], ["serviceaccounts"], ["list", "watch", "create"]),
        _rule(
            ["rbac.authorization.k8s.io"], ["roles", "rolebindings"], ["list", "watch", "create"]
        ),
        # core/v1 Events, as client-go's core/v1 recorder writes them (runtime/events.py).
        _rule([""], ["events"], ["create", "patch"]),
        # What the lifecycle features plan from and write (their ``watches`` and ``rules``):
        # ComputeDomains (§3.9, rule 13b), per-slice budgets (12b), quotas and LimitRanges
        # (13c; without this grant the operator runs without the check).
        *feature_rules(namespaced=True),
        # Held only so the operator may grant them to the Ray autoscaler's Role.
        _rule([""], ["pods/resize"], ["patch"]),
        _rule(["ray.io"], ["rayclusters"], ["delete"]),
        *rayjob_rules(),
        *rayservice_rules(),
    ]


def feature_rules(*, namespaced: bool) -> list[Obj]:
    """The namespaced (or the cluster-scoped) permissions of ``lifecycle.FEATURES``, one rule
    per API group and verbs, in the order the features first ask for them. A feature's rule
    that the core rules above already grant is left out (the backoff's RayCluster patch)."""
    wanted: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for feature in lifecycle.FEATURE_TYPES:
        needs = [(w.rule, w.namespaced) for w in feature.watches]
        needs += [(r, True) for r in feature.rules]
        for rule, scoped in needs:
            if scoped != namespaced or rule in _CORE:
                continue
            resources = wanted.setdefault((rule.group, rule.verbs), [])
            if rule.resource not in resources:
                resources.append(rule.resource)
    return [_rule([group], resources, list(verbs)) for (group, verbs), resources in wanted.items()]


#: Core grants a feature may ask for again.
_CORE = frozenset({Rule("ray.io", "rayclusters", ("patch",))})


def rayjob_rules() -> list[Obj]:
    """The RayJob controller (docs/design.md §11): it watches RayJobs and writes their status,
    deletes one only for deletionStrategy DeleteSelf; creates the RayCluster of each attempt
    (deletes it on retry, suspend and DeleteCluster; patches its worker groups for
    DeleteWorkers, with the rayclusters patch above) and the submitter Job."""
    return [
        _rule(["ray.io"], ["rayjobs"], ["list", "watch", "delete"]),
        _rule(["ray.io"], ["rayjobs/status"], ["patch"]),
        _rule(["ray.io"], ["rayclusters"], ["create"]),
        _rule(["batch"], ["jobs"], ["list", "watch", "create", "delete"]),
    ]


def rayservice_rules() -> list[Obj]:
    """The RayService controller (docs/design.md §12): it watches RayServices and writes their
    status; creates their RayClusters (deleting those traffic left, with the rayclusters
    delete above); creates the serve and head services and patches their selector when traffic
    moves (watched by their labels); patches pods' ``ray.io/serve`` label (pods patch above)."""
    return [
        _rule(["ray.io"], ["rayservices"], ["list", "watch"]),
        _rule(["ray.io"], ["rayservices/status"], ["patch"]),
        _rule([""], ["services"], ["patch"]),
    ]


def crd_reader_rules() -> list[Obj]:
    """Read and watch the one installed RayCluster CRD (KubeRay's or ours) to compare status
    after its pruning (controller/raycluster/crdfit.py; crdwatch.py gets it and watches it by name).
    Cluster-scoped, so a namespaced install (no cluster-level grant at all) goes without:
    the operator then learns the pruning from its own writes."""
    rule = _rule(["apiextensions.k8s.io"], ["customresourcedefinitions"], ["get", "watch"])
    rule["resourceNames"] = ["rayclusters.ray.io"]
    return [rule]


def node_reader_rules() -> list[Obj]:
    """The features' cluster-scoped kinds: host-loss failover and planned disruptions
    (planning/features/host_loss.py, disruption.py) watch Nodes: list and watch (an informer;
    no ``get``: the shipped RBAC holds exactly what a run uses), never a write. Cluster-scoped,
    so even the namespaced install holds this one ClusterRole; without it, run the operator
    with ``--unready-slice-timeout 0`` (no node watch)."""
    return feature_rules(namespaced=False)


def node_reader_rbac(namespace: str) -> list[Obj]:
    """A ClusterRole reading nodes and its binding, for the namespaced install."""
    return _cluster_role(f"{NAME}-nodes", node_reader_rules(), namespace)


def _cluster_role(name: str, rules: list[Obj], namespace: str) -> list[Obj]:
    """A ClusterRole with ``rules`` bound to the operator's ServiceAccount."""
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name, "labels": LABELS},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": LABELS},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}],
        },
    ]


def lease_rules() -> list[Obj]:
    return [_rule(["coordination.k8s.io"], ["leases"], ["get", "create", "update"])]


def service_account(namespace: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": NAME, "namespace": namespace, "labels": LABELS},
    }


def cluster_rbac(namespace: str) -> list[Obj]:
    """ClusterRole + binding: the operator serves every namespace."""
    rules = [*operator_rules(), *crd_reader_rules(), *node_reader_rules()]
    return [*_cluster_role(NAME, rules, namespace), *leader_rbac(namespace)]


def namespaced_rbac(namespace: str, watched: list[str]) -> list[Obj]:
    """A Role + RoleBinding per watched namespace, for ``run --namespace NS ...``."""
    out: list[Obj] = []
    for ns in watched:
        out.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": NAME, "namespace": ns, "labels": LABELS},
                "rules": operator_rules(),
            }
        )
        out.append(_binding("Role", NAME, ns, namespace))
    return [*out, *node_reader_rbac(namespace), *leader_rbac(namespace)]


def leader_rbac(namespace: str) -> list[Obj]:
    name = f"{NAME}-leader-election"
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": namespace, "labels": LABELS},
            "rules": lease_rules(),
        },
        _binding("Role", name, namespace, namespace),
    ]


def _binding(kind: str, role: str, ns: str, sa_namespace: str) -> Obj:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": role, "namespace": ns, "labels": LABELS},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": sa_namespace}],
    }


def deployment(namespace: str, image: str = DEFAULT_IMAGE, watched: list[str] | None = None) -> Obj:
    args = ["run", "--leader-elect", "--log-format=json"]
    args += [f"--namespace={ns}" for ns in watched or []]
    probe = {"periodSeconds": 10, "timeoutSeconds": 2}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": namespace, "labels": LABELS},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": LABELS},
            "template": {
                "metadata": {"labels": LABELS},
                "spec": {
                    "serviceAccountName": NAME,
                    # The image's own user (deploy/Dockerfile: USER 65532), named so that a
                    # kubelet need not read the image to admit runAsNonRoot (Pod Security
                    # `restricted`), and the dev cluster's process runtime runs it as such.
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 65532,
                        "runAsGroup": 65532,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [
                        {
                            "name": "operator",
                            "image": image,
                            "args": args,
                            "env": [
                                {
                                    "name": "POD_NAME",
                                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                                }
                            ],
                            "ports": [
                                {"name": "metrics", "containerPort": 8080},
                                {"name": "health", "containerPort": 8082},
                            ],
                            "livenessProbe": {
                                "httpGet": {"path": "/healthz", "port": "health"},
                                "initialDelaySeconds": 10,
                                **probe,
                            },
                            "readinessProbe": {
                                "httpGet": {"path": "/readyz", "port": "health"},
                                "initialDelaySeconds": 2,
                                **probe,
                            },
                            "resources": {
                                "requests": {"cpu": "100m", "memory": "128Mi"},
                                "limits": {"memory": "512Mi"},
                            },
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]},
                            },
                        }
                    ],
                },
            },
        },
    }


def metrics_service(namespace: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"{NAME}-metrics", "namespace": namespace, "labels": LABELS},
        "spec": {
            "selector": LABELS,
            "ports": [{"name": "metrics", "port": 8080, "targetPort": "metrics"}],
        },
    }


def operator_manifests(
    namespace: str = NAME, image: str = DEFAULT_IMAGE, watched: list[str] | None = None
) -> list[Obj]:
    """Namespace, service account, RBAC (cluster-wide, or per namespace when ``watched``),
    Deployment and metrics Service, in apply order (the CRD is added by the caller)."""
    rbac = namespaced_rbac(namespace, watched) if watched else cluster_rbac(namespace)
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        service_account(namespace),
        *rbac,
        deployment(namespace, image, watched),
        metrics_service(namespace),
    ]
