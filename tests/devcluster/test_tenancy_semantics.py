"""Where the dev cluster's tenancy must answer as kube-apiserver and kube-controller-manager
v1.37 do, each rule driven by the real kubectl the way a team on a shared cluster meets it:
requests defaulted from limits, a budget that names no bound, Pod Security on namespaces and
pod updates, a `type: Pod` LimitRange, pods stuck terminating, and the QoS class.

One dev cluster serves the module, each test in a namespace of its own (docs/design.md §8.1).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from devkube import DevCluster
from devkube.machinery.client import ApiError
from tests.harness import control_planes
from tests.harness import kubectl as kubectl_bin
from tests.harness.cluster import running_cluster
from tests.harness.kubectl import ok, refused
from tests.harness.waiting import eventually

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.control_planes]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def dev_cluster(control_plane: str) -> AsyncIterator[DevCluster]:
    control_planes.require(control_plane)
    async with running_cluster(kubelet_delay=0.2, control_plane=control_plane) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def kubectl(dev_cluster: DevCluster, tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = dev_cluster.write_kubeconfig(tmp_path_factory.mktemp("semantics") / "kubeconfig")
    return kubectl_bin.runner(path)


def pod(name: str, ns: str, resources: Any = None, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "busybox", "command": ["sleep", "1d"]}
    if resources is not None:
        container["resources"] = resources
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
        "spec": {"containers": [container], **spec},
    }


async def apply(kubectl: Any, obj: dict[str, Any]) -> str:
    return str(await ok(kubectl, "apply", "-f", "-", input=json.dumps(obj)))


async def get(kubectl: Any, kind: str, name: str, ns: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(await ok(kubectl, "get", kind, name, "-n", ns, "-o", "json"))
    return found


async def quota(kubectl: Any, ns: str, hard: dict[str, str]) -> None:
    await ok(kubectl, "create", "namespace", ns)
    body = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "q", "namespace": ns},
        "spec": {"hard": hard},
    }
    await apply(kubectl, body)

    async def synced() -> None:
        status = (await get(kubectl, "quota", "q", ns)).get("status") or {}
        assert set(status.get("used") or {}) == set(hard)

    await eventually(synced)


async def test_requests_default_from_limits_so_quota_admits_and_charges_them(
    dev_cluster: DevCluster, kubectl: Any
) -> None:
    ns = "limits-only"
    await quota(kubectl, ns, {"requests.cpu": "2", "requests.nvidia.com/gpu": "1"})
    only = {"limits": {"cpu": "1", "memory": "64Mi", "nvidia.com/gpu": "1"}}
    await apply(kubectl, pod("a", ns, only))
    stored = await get(kubectl, "pod", "a", ns)
    assert stored["spec"]["containers"][0]["resources"]["requests"] == only["limits"]
    used = (await get(kubectl, "quota", "q", ns))["status"]["used"]
    assert used == {"requests.cpu": "1", "requests.nvidia.com/gpu": "1"}, used
    # The GPU set only in limits was charged: a second one exceeds the quota.
    message = await refused(kubectl, "apply", "-f", "-", input=json.dumps(pod("b", ns, only)))
    assert message.endswith(
        'pods "b" is forbidden: exceeded quota: q, requested: requests.nvidia.com/gpu=1, '
        "used: requests.nvidia.com/gpu=1, limited: requests.nvidia.com/gpu=1"
    ), message


async def test_a_budget_with_neither_bound_refuses_every_eviction(
    dev_cluster: DevCluster, kubectl: Any
) -> None:
    ns = "bare-budget"
    await ok(kubectl, "create", "namespace", ns)
    await apply(kubectl, pod("p", ns))
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "b", "namespace": ns},
        "spec": {"selector": {"matchLabels": {"app": "p"}}},
    }
    await apply(kubectl, budget)

    async def counted() -> dict[str, Any]:
        status: dict[str, Any] = (await get(kubectl, "pdb", "b", ns)).get("status") or {}
        assert status.get("currentHealthy") == 1 and status.get("observedGeneration") == 1
        return status

    status = await eventually(counted)
    assert (status["expectedPods"], status["desiredHealthy"], status["disruptionsAllowed"]) == (
        0,
        0,
        0,
    )
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p"}}
    done = await kubectl(
        "create",
        "--raw",
        f"/api/v1/namespaces/{ns}/pods/p/eviction",
        "-f",
        "-",
        input=json.dumps(eviction),
    )
    assert done.returncode != 0
    assert "Cannot evict pod as it would violate the pod's disruption budget." in done.stderr
    assert not (await get(kubectl, "pod", "p", ns))["metadata"].get("deletionTimestamp")


async def test_pod_security_labels_are_validated_on_the_namespace(
    dev_cluster: DevCluster, kubectl: Any
) -> None:
    labels = {"pod-security.kubernetes.io/enforce": "strict"}
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "psa-typo"}}
    body["metadata"]["labels"] = labels
    done = await kubectl("apply", "-f", "-", input=json.dumps(body))
    # NewInvalid's 422, as kube-apiserver's PodSecurity plugin answers: kubectl prints its
    # kind and its cause.
    cause = (
        'metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": '
        "must be one of privileged, baseline, restricted"
    )
    assert (done.returncode, done.stderr) == (1, f'The Namespace "psa-typo" is invalid: {cause}\n')
    with pytest.raises(ApiError) as raised:
        await dev_cluster.client.create("/api/v1/namespaces", body)
    status = raised.value.body
    assert (raised.value.status, status["reason"], status["message"]) == (
        422,
        "Invalid",
        f'Namespace "psa-typo" is invalid: {cause}',
    )
    assert status["details"]["kind"] == "Namespace"
    await ok(kubectl, "create", "namespace", "psa-typo")
    done = await kubectl(
        "label",
        "namespace",
        "psa-typo",
        "pod-security.kubernetes.io/enforce=baseline",
        "pod-security.kubernetes.io/warn-version=1.30",
    )
    assert done.returncode == 1, done.stderr
    found = json.loads(await ok(kubectl, "get", "namespace", "psa-typo", "-o", "json"))
    labels = found["metadata"]["labels"]
    assert "pod-security.kubernetes.io/enforce" not in labels  # nothing was written


async def test_pod_updates_are_checked_when_they_matter(
    dev_cluster: DevCluster, kubectl: Any
) -> None:
    ns = "psa-update"
    await ok(kubectl, "create", "namespace", ns)
    privileged = pod("priv", ns)
    privileged["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    await apply(kubectl, privileged)
    await ok(kubectl, "label", "namespace", ns, "pod-security.kubernetes.io/enforce=baseline")
    # A label changes nothing the policy reads: admitted.
    await ok(kubectl, "label", "pod", "priv", "-n", ns, "team=a")
    # A new image is re-checked against the namespace's enforce level now in force.
    message = await refused(kubectl, "set", "image", "pod/priv", "c=busybox:1.36", "-n", ns)
    assert message.endswith(
        'pods "priv" is forbidden: violates PodSecurity "baseline:latest": privileged '
        '(container "c" must not set securityContext.privileged=true)'
    ), message


async def test_warn_privileged_silences_workload_warnings(
    dev_cluster: DevCluster, kubectl: Any
) -> None:
    ns = "psa-quiet"
    await ok(kubectl, "create", "namespace", ns)
    await ok(
        kubectl,
        "label",
        "namespace",
        ns,
        "pod-security.kubernetes.io/enforce=restricted",
        "pod-security.kubernetes.io/warn=privileged",
    )
    template = pod("x", ns, volumes=[{"name": "a", "hostPath": {"path": "/a"}}])
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "quiet", "namespace": ns},
        "spec": {
            "suspend": True,  # its pods would be refused: only the template is judged here
            "template": {"spec": {**template["spec"], "restartPolicy": "Never"}},
        },
    }
    done = await kubectl("apply", "-f", "-", input=json.dumps(job))
    assert done.returncode == 0, done.stderr
    assert "PodSecurity" not in done.stderr, done.stderr
    # The pod itself is enforced, in the current wording for volumes.
    two = pod("v", ns, volumes=[{"name": "b", "nfs": {"server": "s", "path": "/"}}])
    two["spec"]["volumes"].insert(0, {"name": "a", "hostPath": {"path": "/a"}})
    message = await refused(kubectl, "apply", "-f", "-", input=json.dumps(two))
    assert (
        'restricted volume types (volumes "a", "b" use restricted volume types "hostPath", '
        '"nfs")' in message
    ), message


async def test_a_pod_limitrange_takes_the_largest_init_container(
    dev_cluster: DevCluster, kubectl: Any
) -> None:
    ns = "lr-pod"
    await ok(kubectl, "create", "namespace", ns)
    limit_range = {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "per-pod", "namespace": ns},
        "spec": {"limits": [{"type": "Pod", "max": {"cpu": "2"}}]},
    }
    await apply(kubectl, limit_range)
    two = {"limits": {"cpu": "2"}, "requests": {"cpu": "2"}}
    body = pod("p", ns, two)
    body["spec"]["initContainers"] = [
        {"name": "init", "image": "busybox", "command": ["true"], "resources": two}
    ]
    await apply(kubectl, body)  # max(2, 2) = 2, not 2 + 2
    three = {"limits": {"cpu": "3"}, "requests": {"cpu": "3"}}
    body = pod("q", ns, two)
    body["spec"]["initContainers"] = [
        {"name": "init", "image": "busybox", "command": ["true"], "resources": three}
    ]
    message = await refused(kubectl, "apply", "-f", "-", input=json.dumps(body))
    assert message.endswith("maximum cpu usage per Pod is 2, but limit is 3"), message


@pytest.mark.embedded_only(
    "open difference: kube-controller-manager recounts a quota on pod events and its 5 min "
    "resync only, so a pod past its grace stays charged until then; the dev cluster frees it "
    "when the grace ends"
)
async def test_a_pod_stuck_terminating_past_its_grace_frees_its_quota(
    dev_cluster: DevCluster, kubectl: Any
) -> None:
    """A node that stopped answering keeps its pods terminating for ever; kube stops charging
    them once deletionTimestamp + grace has passed, so the team can replace them."""
    ns = "stuck"
    await quota(kubectl, ns, {"requests.cpu": "1"})
    ghost = {
        "apiVersion": "v1",
        "kind": "Node",
        # Its kubelet is stopped (the dev cluster's switch): nothing will ever finish its pods.
        "metadata": {
            "name": "ghost-stuck",
            "annotations": {"dev.raycluster-operator.io/kubelet": "stopped"},
        },
        "spec": {"taints": [{"key": "ghost", "effect": "NoSchedule"}]},
    }
    await apply(kubectl, ghost)
    one = {"requests": {"cpu": "1"}}
    await apply(kubectl, pod("old", ns, one, nodeName="ghost-stuck"))
    await ok(kubectl, "delete", "pod", "old", "-n", ns, "--grace-period=1", "--wait=false")

    async def freed() -> None:
        used = (await get(kubectl, "quota", "q", ns))["status"]["used"]
        assert used["requests.cpu"] == "0", used

    await eventually(freed)
    stuck = await get(kubectl, "pod", "old", ns)
    assert stuck["metadata"]["deletionTimestamp"]  # still there, no longer charged
    await apply(kubectl, pod("new", ns, one))


async def test_qos_class_reads_limitrange_defaults_and_compares_numbers(
    dev_cluster: DevCluster, kubectl: Any
) -> None:
    ns = "qos"
    await ok(kubectl, "create", "namespace", ns)
    defaults = {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "defaults", "namespace": ns},
        "spec": {"limits": [{"type": "Container", "default": {"cpu": "1", "memory": "64Mi"}}]},
    }
    await apply(kubectl, defaults)

    async def created(body: dict[str, Any]) -> str:
        """The class the API server wrote at create (the kubelet reports it later too)."""
        made = json.loads(
            await ok(kubectl, "create", "-f", "-", "-o", "json", input=json.dumps(body))
        )
        return str(made["status"]["qosClass"])

    assert await created(pod("plain", ns)) == "Guaranteed"
    same = {"requests": {"cpu": "1000m", "memory": "64Mi"}, "limits": {"cpu": "1"}}
    assert await created(pod("milli", ns, same)) == "Guaranteed"


def resource_quota(name: str, ns: str, **spec: Any) -> str:
    body = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name}, "spec": spec}
    return json.dumps({**body, "metadata": {"name": name, "namespace": ns}})


async def test_resource_quotas_are_validated_as_kube_apiserver_validates_them(
    dev_cluster: DevCluster, kubectl: Any
) -> None:
    """A quantity that does not parse fails the decoding (400); a negative one, a fraction of
    an object count, an unknown bare name, a scope that cannot cover a resource and a changed
    scope are refused (422) with kube's wording; none is stored."""
    ns = "t-quota-valid"
    await ok(kubectl, "create", "namespace", ns)
    create = ("create", "-f", "-")
    message = await refused(kubectl, *create, input=resource_quota("a", ns, hard={"cpu": "lots"}))
    assert message.endswith(
        'ResourceQuota in version "v1" cannot be handled as a ResourceQuota: quantities must '
        "match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    ), message
    message = await refused(kubectl, *create, input=resource_quota("b", ns, hard={"cpu": "1K"}))
    assert message.endswith("unable to parse quantity's suffix"), message
    message = await refused(kubectl, *create, input=resource_quota("c", ns, hard={"cpu": "-1"}))
    assert message.endswith(
        'ResourceQuota "c" is invalid: spec.hard[cpu]: Invalid value: "-1": must be greater '
        "than or equal to 0"
    ), message
    message = await refused(kubectl, *create, input=resource_quota("d", ns, hard={"pods": "1.5"}))
    assert message.endswith(
        'ResourceQuota "d" is invalid: spec.hard[pods]: Invalid value: "1500m": must be an integer'
    ), message
    message = await refused(kubectl, *create, input=resource_quota("e", ns, hard={"gpus": "1"}))
    assert message.endswith(
        'spec.hard[gpus]: Invalid value: "gpus": must be a standard resource for quota'
    ), message
    both = resource_quota("f", ns, hard={"pods": "1"}, scopes=["Terminating", "NotTerminating"])
    message = await refused(kubectl, *create, input=both)
    assert message.endswith(
        'spec.scopes: Invalid value: ["Terminating","NotTerminating"]: conflicting scopes'
    ), message
    cpu = resource_quota("g", ns, hard={"requests.cpu": "1"}, scopes=["BestEffort"])
    message = await refused(kubectl, *create, input=cpu)
    assert message.endswith(
        'spec.scopes: Invalid value: ["BestEffort"]: unsupported scope applied to resource'
    ), message
    selector = {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In"}]}
    bad = resource_quota("h", ns, hard={"pods": "1"}, scopeSelector=selector)
    message = await refused(kubectl, *create, input=bad)
    assert message.endswith(
        "spec.scopeSelector.matchExpressions.values: Required value: must be at least one value "
        "when `operator` is 'In' or 'NotIn' for scope selector"
    ), message
    scoped = resource_quota("ok", ns, hard={"pods": "2"}, scopes=["NotBestEffort"])
    await ok(kubectl, *create, input=scoped)
    patch = '{"spec": {"scopes": ["Terminating"]}}'
    message = await refused(kubectl, "patch", "quota", "ok", "-n", ns, "--type=merge", "-p", patch)
    assert message.endswith(
        'ResourceQuota "ok" is invalid: spec.scopes: Invalid value: ["Terminating"]: field is '
        "immutable"
    ), message
    names = (await ok(kubectl, "get", "quota", "-n", ns, "-o", "name")).split()
    assert names == ["resourcequota/ok"]


async def test_limit_ranges_are_validated_after_their_defaults(
    dev_cluster: DevCluster, kubectl: Any
) -> None:
    """A default above max (its defaulted request too), a request above the limit, an unknown
    type, a Pod item with defaults and a ratio below 1 are refused with kube's wording."""
    ns = "t-limitrange-valid"
    await ok(kubectl, "create", "namespace", ns)

    def limit_range(name: str, *limits: dict[str, Any]) -> str:
        meta = {"name": name, "namespace": ns}
        return json.dumps(
            {
                "apiVersion": "v1",
                "kind": "LimitRange",
                "metadata": meta,
                "spec": {"limits": list(limits)},
            }
        )

    create = ("create", "-f", "-")
    above = limit_range("a", {"type": "Container", "default": {"cpu": "2"}, "max": {"cpu": "1"}})
    message = await refused(kubectl, *create, input=above)
    assert message.endswith(  # two causes: kubectl lists them
        'The LimitRange "a" is invalid: \n* spec.limits[0].defaultRequest[cpu]: Invalid value: '
        '"2": default request value 2 is greater than max value 1\n* spec.limits[0].default[cpu]: '
        'Invalid value: "1": default value 2 is greater than max value 1'
    ), message
    inverted = {
        "type": "Container",
        "default": {"memory": "1Gi"},
        "defaultRequest": {"memory": "2Gi"},
    }
    message = await refused(kubectl, *create, input=limit_range("b", inverted))
    assert message.endswith(
        'spec.limits[0].defaultRequest[memory]: Invalid value: "2Gi": default request value '
        "2Gi is greater than default limit value 1Gi"
    ), message
    message = await refused(kubectl, *create, input=limit_range("c", {"type": "Deployment"}))
    assert message.endswith(
        'spec.limits[0].type: Invalid value: "Deployment": must be a standard limit type or '
        "fully qualified"
    ), message
    pod_defaults = {"type": "Pod", "default": {"cpu": "1"}}
    message = await refused(kubectl, *create, input=limit_range("d", pod_defaults))
    assert message.endswith(
        "spec.limits[0].default: Forbidden: may not be specified when `type` is 'Pod'"
    ), message
    ratio = {"type": "Container", "maxLimitRequestRatio": {"cpu": "500m"}}
    message = await refused(kubectl, *create, input=limit_range("e", ratio))
    assert message.endswith(
        'spec.limits[0].maxLimitRequestRatio[cpu]: Invalid value: "500m": ratio 500m is less than 1'
    ), message
    assert (await ok(kubectl, "get", "limitrange", "-n", ns, "-o", "name")).split() == []


async def test_disruption_budgets_are_validated(dev_cluster: DevCluster, kubectl: Any) -> None:
    """Both bounds, a negative count, a percentage over 100% or malformed, and an unknown
    unhealthy-pod policy are refused with kube's wording; none is stored."""
    ns = "t-pdb-valid"
    await ok(kubectl, "create", "namespace", ns)

    def budget(name: str, **spec: Any) -> str:
        meta = {"name": name, "namespace": ns}
        spec = {"selector": {"matchLabels": {"app": "x"}}, **spec}
        return json.dumps(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": meta,
                "spec": spec,
            }
        )

    create = ("create", "-f", "-")
    message = await refused(kubectl, *create, input=budget("a", minAvailable=1, maxUnavailable=1))
    assert message.endswith(
        'spec: Invalid value: {"MinAvailable":1,"Selector":{"matchLabels":{"app":"x"}},'
        '"MaxUnavailable":1,"UnhealthyPodEvictionPolicy":null}: minAvailable and '
        "maxUnavailable cannot be both set"
    ), message
    message = await refused(kubectl, *create, input=budget("b", minAvailable=-1))
    assert message.endswith(
        "spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"
    ), message
    message = await refused(kubectl, *create, input=budget("c", maxUnavailable="150%"))
    assert message.endswith(
        'spec.maxUnavailable: Invalid value: "150%": must not be greater than 100%'
    ), message
    message = await refused(kubectl, *create, input=budget("d", maxUnavailable="half"))
    assert message.endswith(
        'spec.maxUnavailable: Invalid value: "half": a valid percent string must be a numeric '
        "string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is "
        "'[0-9]+%')"
    ), message
    policy = budget("e", minAvailable=1, unhealthyPodEvictionPolicy="Sometimes")
    message = await refused(kubectl, *create, input=policy)
    assert message.endswith(
        'spec.unhealthyPodEvictionPolicy: Unsupported value: "Sometimes": supported values: '
        '"AlwaysAllow", "IfHealthyBudget"'
    ), message
    assert (await ok(kubectl, "get", "pdb", "-n", ns, "-o", "name")).split() == []


async def test_immutable_config_and_secret_data(dev_cluster: DevCluster, kubectl: Any) -> None:
    """A Secret's stringData is stored base64 in data with type Opaque; data that is not base64
    fails the decoding; once immutable, data and the flag are refused a change, as is a
    Secret's type at any time."""
    ns = "t-immutable"
    await ok(kubectl, "create", "namespace", ns)
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": ns}}
    await ok(kubectl, "create", "-f", "-", input=json.dumps({**secret, "stringData": {"k": "v"}}))
    stored = await get(kubectl, "secret", "s", ns)
    assert (stored["data"], stored["type"], "stringData" in stored) == (
        {"k": "dg=="},
        "Opaque",
        False,
    )
    bad = {**secret, "metadata": {"name": "b", "namespace": ns}, "data": {"k": "not base64!"}}
    message = await refused(kubectl, "create", "-f", "-", input=json.dumps(bad))
    assert message.endswith(
        'Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 3'
    ), message
    patch = '{"type": "example.com/other"}'
    message = await refused(kubectl, "patch", "secret", "s", "-n", ns, "--type=merge", "-p", patch)
    assert message.endswith(
        'Secret "s" is invalid: type: Invalid value: "example.com/other": field is immutable'
    ), message
    await ok(kubectl, "patch", "secret", "s", "-n", ns, "--type=merge", "-p", '{"immutable": true}')
    message = await refused(
        kubectl, "patch", "secret", "s", "-n", ns, "--type=merge", "-p", '{"data": {"k": "dw=="}}'
    )
    assert message.endswith(
        'Secret "s" is invalid: data: Forbidden: field is immutable when `immutable` is set'
    ), message
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": ns}}
    frozen = {**config, "immutable": True, "data": {"a": "b"}}
    await ok(kubectl, "create", "-f", "-", input=json.dumps(frozen))
    message = await refused(
        kubectl, "patch", "configmap", "c", "-n", ns, "--type=merge", "-p", '{"immutable": false}'
    )
    assert message.endswith(
        'ConfigMap "c" is invalid: immutable: Forbidden: field is immutable when `immutable` is set'
    ), message
    # Labels stay writable.
    await ok(kubectl, "label", "configmap", "c", "-n", ns, "x=y")
    assert (await get(kubectl, "configmap", "c", ns))["data"] == {"a": "b"}


async def test_role_binding_role_refs_are_validated_and_fixed(
    dev_cluster: DevCluster, kubectl: Any
) -> None:
    """A RoleBinding to a Group (not a role kind) is refused, and a stored binding's roleRef
    never changes, with kube's wording."""
    ns = "t-rolebinding"
    await ok(kubectl, "create", "namespace", ns)
    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "x"}
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "b", "namespace": ns},
        "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}],
        "roleRef": ref,
    }
    message = await refused(kubectl, "create", "-f", "-", input=json.dumps(binding))
    assert message.endswith(
        'RoleBinding "b" is invalid: roleRef.kind: Unsupported value: "Group": supported '
        'values: "Role", "ClusterRole"'
    ), message
    await ok(kubectl, "create", "rolebinding", "b", "-n", ns, "--clusterrole=view", "--user=alice")
    patch = '{"roleRef": {"name": "edit"}}'
    message = await refused(
        kubectl, "patch", "rolebinding", "b", "-n", ns, "--type=merge", "-p", patch
    )
    assert message.endswith(
        'RoleBinding "b" is invalid: roleRef: Invalid value: '
        '{"APIGroup":"rbac.authorization.k8s.io","Kind":"ClusterRole","Name":"edit"}: '
        "field is immutable"
    ), message


async def test_deployment_selector_must_match_its_template_and_stay(
    dev_cluster: DevCluster, kubectl: Any
) -> None:
    """A Deployment whose selector misses its template's labels, or is empty, is refused; a
    stored one's selector never changes (kube's wording for each)."""
    ns = "t-deploy-valid"
    await ok(kubectl, "create", "namespace", ns)

    def deployment(name: str, selector: dict[str, Any], labels: dict[str, str]) -> str:
        container = {"name": "c", "image": "busybox", "command": ["sleep", "1d"]}
        template = {"metadata": {"labels": labels}, "spec": {"containers": [container]}}
        spec = {"replicas": 0, "selector": selector, "template": template}
        meta = {"name": name, "namespace": ns}
        return json.dumps(
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": spec}
        )

    create = ("create", "-f", "-")
    mismatch = deployment("a", {"matchLabels": {"app": "a"}}, {"app": "other", "tier": "x"})
    message = await refused(kubectl, *create, input=mismatch)
    assert message.endswith(
        'Deployment "a" is invalid: spec.template.metadata.labels: Invalid value: '
        '{"app":"other","tier":"x"}: `selector` does not match template `labels`'
    ), message
    message = await refused(kubectl, *create, input=deployment("b", {}, {"app": "b"}))
    assert message.endswith(
        "spec.selector: Invalid value: {}: empty selector is invalid for deployment"
    ), message
    await ok(kubectl, *create, input=deployment("c", {"matchLabels": {"app": "c"}}, {"app": "c"}))
    labels = {"app": "c", "v": "2"}
    changed = {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}}}
    patch = json.dumps({"spec": changed})
    message = await refused(
        kubectl, "patch", "deployment", "c", "-n", ns, "--type=merge", "-p", patch
    )
    assert message.endswith(
        'Deployment "c" is invalid: spec.selector: Invalid value: '
        '{"matchLabels":{"app":"c","v":"2"}}: field is immutable'
    ), message


async def test_a_jobs_fixed_fields_stay_fixed(dev_cluster: DevCluster, kubectl: Any) -> None:
    """A Job's completions (not Indexed) never change; a suspended Job that never started may
    change its template's node selector and resources but nothing else of it."""
    ns = "t-job-fixed"
    await ok(kubectl, "create", "namespace", ns)
    container = {"name": "c", "image": "busybox", "command": ["true"]}
    template = {"spec": {"restartPolicy": "Never", "containers": [container]}}
    meta = {"name": "j", "namespace": ns}
    body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta}
    spec = {"suspend": True, "completions": 1, "template": template}
    await ok(kubectl, "create", "-f", "-", input=json.dumps({**body, "spec": spec}))

    async def patch(change: dict[str, Any]) -> Any:
        return await kubectl(
            "patch", "job", "j", "-n", ns, "--type=strategic", "-p", json.dumps({"spec": change})
        )

    done = await patch({"completions": 5})
    assert done.returncode != 0
    assert done.stderr.strip().endswith(
        'The Job "j" is invalid: spec.completions: Invalid value: 5: field is immutable'
    ), done.stderr
    resources = {"requests": {"cpu": "100m"}}
    allowed = {"nodeSelector": {"pool": "a"}, "containers": [{"name": "c", "resources": resources}]}
    done = await patch({"template": {"spec": allowed}})
    assert done.returncode == 0, done.stderr
    done = await patch({"template": {"spec": {"containers": [{"name": "c", "image": "alpine"}]}}})
    assert done.returncode != 0
    message = done.stderr.strip()
    # kube shows its internal Go struct as the value; the dev cluster shows the v1 spec.
    assert message.startswith('The Job "j" is invalid: spec.template.spec: Invalid value: {')
    assert message.endswith(": field is immutable"), message
    stored = (await get(kubectl, "job", "j", ns))["spec"]["template"]["spec"]
    assert (stored["nodeSelector"], stored["containers"][0]["image"]) == ({"pool": "a"}, "busybox")
