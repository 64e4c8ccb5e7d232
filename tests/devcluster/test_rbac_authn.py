"""Authentication with the real kubectl: the admin kubeconfig, ServiceAccount tokens from
`kubectl create token` (TokenRequest), what makes a token stop working, and 401s."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from devkube import DevCluster
from devkube.machinery.client import ApiClient, ApiError
from tests.harness.kubectl import Run, as_service_account, ok, refused, runner, user_of

#: One cluster for the module's tests (accounts and namespaces of their own names; §8.1).
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture
def dev_cluster(module_cluster: DevCluster) -> DevCluster:
    return module_cluster


# kubectl's words for a 401 (the parenthesis depends on the request that got it).
UNAUTHORIZED = "error: You must be logged in to the server ("


def _unauthorized(stderr: str) -> bool:
    return stderr.splitlines()[-1].startswith(UNAUTHORIZED)


def _with_token(cluster: DevCluster, tmp: Path, name: str, token: str | None) -> Path:
    config = cluster.kubeconfig_dict(token="x")
    if token is None:
        config["users"][0]["user"] = {}
    else:
        config["users"][0]["user"]["token"] = token
    path = tmp / name
    path.write_text(yaml.safe_dump(config))
    return path


async def test_the_admin_kubeconfig_is_a_cluster_admin(kubectl: Run) -> None:
    who = await ok(kubectl, "auth", "whoami", "-o", "json")
    info = yaml.safe_load(who)["status"]["userInfo"]
    assert info["username"] == "kubernetes-admin"
    assert info["groups"] == ["system:masters", "system:authenticated"]
    assert (await ok(kubectl, "auth", "can-i", "*", "*")).strip() == "yes"


async def test_no_token_or_a_foreign_one_is_unauthorized(
    dev_cluster: DevCluster, tmp_path: Path
) -> None:
    for name, token in [("garbage", "not-a-token"), ("jwt", "a.b.c")]:
        run = runner(_with_token(dev_cluster, tmp_path, name, token))
        assert _unauthorized(await refused(run, "get", "pods")), name
    # No credentials at all (kubectl would prompt for a password): the Status body.
    async with ApiClient(dev_cluster.url, None, dev_cluster.ca_pem) as anonymous:
        with pytest.raises(ApiError) as caught:
            await anonymous.list("/api/v1/namespaces/default/pods")
        assert caught.value.status == 401
        assert caught.value.body == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "Unauthorized",
            "reason": "Unauthorized",
            "code": 401,
        }
        # Health and version stay public.
        assert (await anonymous.get("/version"))["major"] == "1"


async def test_create_token_authenticates_as_the_service_account(
    kubectl: Run, dev_cluster: DevCluster, tmp_path: Path
) -> None:
    await ok(kubectl, "create", "namespace", "team")
    bob = await as_service_account(kubectl, dev_cluster, tmp_path, "bob", "team")
    info = yaml.safe_load(await ok(bob, "auth", "whoami", "-o", "json"))["status"]["userInfo"]
    assert info["username"] == user_of("team", "bob")
    assert info["groups"] == [
        "system:serviceaccounts",
        "system:serviceaccounts:team",
        "system:authenticated",
    ]
    uid = await ok(kubectl, "get", "sa", "bob", "-n", "team", "-o", "jsonpath={.metadata.uid}")
    assert info["uid"] == uid
    # Discovery works for any authenticated user (system:discovery), so kubectl can start.
    assert "pods" in await ok(bob, "api-resources", "--api-group=", "-o", "name")


async def test_a_token_dies_with_its_service_account_and_its_bound_pod(
    kubectl: Run, dev_cluster: DevCluster, tmp_path: Path
) -> None:
    await ok(kubectl, "create", "serviceaccount", "short")
    await ok(kubectl, "run", "holder", "--image=busybox", "--restart=Never")
    bound = (
        await ok(
            kubectl,
            "create",
            "token",
            "short",
            "--bound-object-kind=Pod",
            "--bound-object-name=holder",
        )
    ).strip()
    free = (await ok(kubectl, "create", "token", "short")).strip()
    bound_run = runner(_with_token(dev_cluster, tmp_path, "bound", bound))
    free_run = runner(_with_token(dev_cluster, tmp_path, "free", free))
    for run in (bound_run, free_run):
        assert "short" in await ok(run, "auth", "whoami")
    who = yaml.safe_load(await ok(bound_run, "auth", "whoami", "-o", "json"))
    assert who["status"]["userInfo"]["extra"]["authentication.kubernetes.io/pod-name"] == ["holder"]

    await ok(kubectl, "delete", "pod", "holder", "--grace-period=0", "--force")
    assert _unauthorized(await refused(bound_run, "auth", "whoami"))
    assert "short" in await ok(free_run, "auth", "whoami")

    await ok(kubectl, "delete", "serviceaccount", "short")
    assert _unauthorized(await refused(free_run, "auth", "whoami"))
    # A namesake created later is another account (another uid): the old token stays dead.
    await ok(kubectl, "create", "serviceaccount", "short")
    assert _unauthorized(await refused(free_run, "auth", "whoami"))


async def test_a_token_for_another_audience_does_not_authenticate(
    kubectl: Run, dev_cluster: DevCluster, tmp_path: Path
) -> None:
    token = (await ok(kubectl, "create", "token", "default", "--audience=vault")).strip()
    run = runner(_with_token(dev_cluster, tmp_path, "vault", token))
    assert _unauthorized(await refused(run, "auth", "whoami"))


async def test_token_request_validation_and_missing_accounts(kubectl: Run) -> None:
    short = await refused(kubectl, "create", "token", "default", "--duration=5m")
    assert short == (
        'error: failed to create token: TokenRequest.authentication.k8s.io "default" is '
        "invalid: spec.expirationSeconds: Invalid value: 300: may not specify a duration less "
        "than 10 minutes"
    )
    missing = await refused(kubectl, "create", "token", "nobody")
    assert missing == 'error: failed to create token: serviceaccounts "nobody" not found'


async def test_every_namespace_has_a_default_account_that_pods_run_as(kubectl: Run) -> None:
    await ok(kubectl, "create", "namespace", "fresh")
    assert (await ok(kubectl, "get", "sa", "-n", "fresh", "-o", "name")).split() == [
        "serviceaccount/default"
    ]
    await ok(kubectl, "delete", "sa", "default", "-n", "fresh")
    assert (await ok(kubectl, "get", "sa", "-n", "fresh", "-o", "name")).split() == [
        "serviceaccount/default"
    ]  # recreated, as kube's service account controller does
    await ok(kubectl, "run", "p", "-n", "fresh", "--image=busybox", "--restart=Never")
    account = await ok(
        kubectl, "get", "pod", "p", "-n", "fresh", "-o", "jsonpath={.spec.serviceAccountName}"
    )
    assert account == "default"


async def test_a_pod_of_a_missing_service_account_is_refused(kubectl: Run) -> None:
    pod = """
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  serviceAccountName: ghost
  containers: [{name: c, image: busybox}]
"""
    assert await refused(kubectl, "create", "-f", "-", input=pod) == (
        'Error from server (Forbidden): error when creating "STDIN": pods "p" is forbidden: '
        'error looking up service account default/ghost: serviceaccount "ghost" not found'
    )
    await ok(kubectl, "create", "serviceaccount", "ghost")
    await ok(kubectl, "create", "-f", "-", input=pod)
