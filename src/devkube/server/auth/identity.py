"""Who a request is from: the user a credential stands for, as kube-apiserver names users.

The identity of the request being served travels in a context variable, set by the
authentication middleware, so that admission (RBAC escalation checks) can see who writes
without every handler passing it along. Code running outside any request (the server's own
bootstrap, unit tests calling `Objects` directly) sees no user and is treated as privileged,
like the real server's loopback client.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field

MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
SERVICE_ACCOUNTS = "system:serviceaccounts"
SA_PREFIX = "system:serviceaccount:"
ADMIN_NAME = "kubernetes-admin"


@dataclass(frozen=True)
class UserInfo:
    """A user name, its uid and groups (in the order kube lists them) and extra fields."""

    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: tuple[tuple[str, tuple[str, ...]], ...] = field(default=())

    @property
    def privileged(self) -> bool:
        """Members of system:masters pass every authorization and escalation check."""
        return MASTERS in self.groups


ADMIN = UserInfo(ADMIN_NAME, (MASTERS, AUTHENTICATED))

current_user: ContextVar[UserInfo | None] = ContextVar("devkube_current_user", default=None)
#: The request's authorization attributes (a requestinfo.Attributes), for users RBAC checks.
current_request: ContextVar[object | None] = ContextVar("devkube_current_request", default=None)


def service_account_username(namespace: str, name: str) -> str:
    return f"{SA_PREFIX}{namespace}:{name}"


def service_account_groups(namespace: str) -> tuple[str, ...]:
    return (SERVICE_ACCOUNTS, f"{SERVICE_ACCOUNTS}:{namespace}", AUTHENTICATED)


def service_account_user(
    namespace: str, name: str, uid: str = "", extra: dict[str, tuple[str, ...]] | None = None
) -> UserInfo:
    return UserInfo(
        service_account_username(namespace, name),
        service_account_groups(namespace),
        uid,
        tuple(sorted((extra or {}).items())),
    )


def split_service_account(username: str) -> tuple[str, str] | None:
    """(namespace, name) of a `system:serviceaccount:NS:NAME` user name, else None."""
    if not username.startswith(SA_PREFIX):
        return None
    namespace, sep, name = username[len(SA_PREFIX) :].partition(":")
    if not sep or not namespace or not name or ":" in name:
        return None
    return namespace, name
