"""RBAC escalation prevention and impersonation, with the real kubectl.

A subject that may create Roles may only grant what it holds itself, unless it may `escalate`;
it may only bind a role whose permissions it holds, unless it may `bind` it. The admin
(system:masters) is never refused. `kubectl --as/--as-group` needs `impersonate`.
"""

from __future__ import annotations

from pathlib import Path

from devkube import DevCluster
from tests.harness.kubectl import Run, as_service_account, ok, refused, user_of

GROUPS = '["system:serviceaccounts" "system:serviceaccounts:default" "system:authenticated"]'


def not_held(kind: str, name: str, *missing: str) -> str:
    return (
        f'Error from server (Forbidden): {kind}.rbac.authorization.k8s.io "{name}" is forbidden: '
        f'user "{user_of("default", "alice")}" (groups={GROUPS}) is attempting to grant RBAC '
        "permissions not currently held:\n" + "\n".join(missing)
    )


async def role_admin(kubectl: Run, cluster: DevCluster, tmp: Path) -> Run:
    """alice may manage Roles and RoleBindings in default, and read pods there."""
    alice = await as_service_account(kubectl, cluster, tmp, "alice")
    await ok(
        kubectl,
        "create",
        "role",
        "rbac-admin",
        "--verb=create,update,get,list,patch",
        "--resource=roles,rolebindings",
    )
    await ok(kubectl, "create", "role", "reader", "--verb=get,list", "--resource=pods")
    for role in ("rbac-admin", "reader"):
        await ok(
            kubectl,
            "create",
            "rolebinding",
            role,
            f"--role={role}",
            "--serviceaccount=default:alice",
        )
    return alice


async def test_a_role_may_grant_only_what_its_author_holds(
    kubectl: Run, dev_cluster: DevCluster, tmp_path: Path
) -> None:
    alice = await role_admin(kubectl, dev_cluster, tmp_path)
    await ok(alice, "create", "role", "sub-reader", "--verb=get", "--resource=pods")
    refusal = await refused(
        alice,
        "create",
        "role",
        "deleter",
        "--verb=get,delete,deletecollection",
        "--resource=pods,secrets",
    )
    assert refusal == not_held(
        "roles",
        "deleter",
        '{APIGroups:[""], Resources:["pods"], Verbs:["delete" "deletecollection"]}',
        '{APIGroups:[""], Resources:["secrets"], Verbs:["get" "delete" "deletecollection"]}',
    )
    # an update that adds a permission not held is refused the same way
    role = await ok(alice, "get", "role", "sub-reader", "-o", "yaml")
    widened = role.replace("- get", "- get\n  - watch")
    assert await refused(alice, "replace", "-f", "-", input=widened) == not_held(
        "roles", "sub-reader", '{APIGroups:[""], Resources:["pods"], Verbs:["watch"]}'
    ).replace("(Forbidden): ", '(Forbidden): error when replacing "STDIN": ')
    # a ClusterRole is checked against what alice holds cluster-wide (nothing)
    await ok(
        kubectl, "create", "clusterrole", "cr-admin", "--verb=create", "--resource=clusterroles"
    )
    await ok(
        kubectl,
        "create",
        "clusterrolebinding",
        "alice-cr",
        "--clusterrole=cr-admin",
        "--serviceaccount=default:alice",
    )
    assert await refused(
        alice, "create", "clusterrole", "c", "--verb=get", "--resource=pods"
    ) == not_held("clusterroles", "c", '{APIGroups:[""], Resources:["pods"], Verbs:["get"]}')

    # with `escalate` on roles, anything goes
    await ok(kubectl, "create", "role", "escalate", "--verb=escalate", "--resource=roles")
    await ok(
        kubectl,
        "create",
        "rolebinding",
        "escalate",
        "--role=escalate",
        "--serviceaccount=default:alice",
    )
    await ok(alice, "create", "role", "deleter", "--verb=delete", "--resource=pods,secrets")
    # the admin is never refused
    await ok(kubectl, "create", "role", "anything", "--verb=*", "--resource=*")


async def test_a_binding_needs_the_roles_permissions_or_bind(
    kubectl: Run, dev_cluster: DevCluster, tmp_path: Path
) -> None:
    alice = await role_admin(kubectl, dev_cluster, tmp_path)
    await ok(kubectl, "create", "role", "writer", "--verb=create,delete", "--resource=pods")
    await ok(alice, "create", "rolebinding", "ok", "--role=reader", "--serviceaccount=default:x")
    refusal = await refused(
        alice, "create", "rolebinding", "w", "--role=writer", "--serviceaccount=default:x"
    )
    assert refusal == not_held(
        "rolebindings", "w", '{APIGroups:[""], Resources:["pods"], Verbs:["create" "delete"]}'
    ).replace("Error from server (Forbidden): ", "error: failed to create rolebinding: ")
    missing = await refused(
        alice, "create", "rolebinding", "m", "--role=nothing", "--serviceaccount=default:x"
    )
    assert missing.endswith('role.rbac.authorization.k8s.io "nothing" not found')

    # `bind` on that one role (resourceNames) lifts the check for it only
    await ok(
        kubectl,
        "create",
        "role",
        "binder",
        "--verb=bind",
        "--resource=roles",
        "--resource-name=writer",
    )
    await ok(
        kubectl,
        "create",
        "rolebinding",
        "binder",
        "--role=binder",
        "--serviceaccount=default:alice",
    )
    await ok(alice, "create", "rolebinding", "w", "--role=writer", "--serviceaccount=default:x")
    await ok(kubectl, "create", "role", "other", "--verb=create", "--resource=secrets")
    assert "not currently held" in await refused(
        alice, "create", "rolebinding", "o", "--role=other", "--serviceaccount=default:x"
    )


async def test_impersonation_is_for_those_who_may(
    kubectl: Run, dev_cluster: DevCluster, tmp_path: Path
) -> None:
    alice = await role_admin(kubectl, dev_cluster, tmp_path)
    await ok(kubectl, "create", "serviceaccount", "bob")
    await ok(kubectl, "create", "role", "svc", "--verb=list", "--resource=services")
    await ok(kubectl, "create", "rolebinding", "svc", "--role=svc", "--serviceaccount=default:bob")
    await ok(kubectl, "create", "rolebinding", "devs", "--role=reader", "--group=devs")
    bob = "--as=system:serviceaccount:default:bob"

    # the admin impersonates: a ServiceAccount gets its groups, a user the groups asked for
    assert (await kubectl("auth", "can-i", "list", "services", bob)).stdout.strip() == "yes"
    assert (await kubectl("auth", "can-i", "list", "pods", bob)).stdout.strip() == "no"
    assert (await kubectl("get", "services", bob)).returncode == 0
    refusal = await refused(kubectl, "get", "pods", bob)
    assert refusal == (
        "Error from server (Forbidden): pods is forbidden: User "
        '"system:serviceaccount:default:bob" cannot list resource "pods" in API group "" in the '
        'namespace "default"'
    )
    jane = ["--as=jane", "--as-group=devs"]
    assert (await kubectl("auth", "can-i", "list", "pods", *jane)).stdout.strip() == "yes"
    assert (await kubectl("auth", "can-i", "list", "pods", "--as=jane")).stdout.strip() == "no"
    who = await ok(kubectl, "auth", "whoami", *jane)
    assert "jane" in who and "[devs system:authenticated]" in who

    # alice may not impersonate
    assert await refused(alice, "get", "pods", "--as=jane") == (
        'Error from server (Forbidden): users "jane" is forbidden: User '
        f'"{user_of("default", "alice")}" cannot impersonate resource "users" in API group "" '
        "at the cluster scope"
    )
    assert await refused(alice, "get", "pods", bob) == (
        'Error from server (Forbidden): serviceaccounts "bob" is forbidden: User '
        f'"{user_of("default", "alice")}" cannot impersonate resource "serviceaccounts" in API '
        'group "" in the namespace "default"'
    )
