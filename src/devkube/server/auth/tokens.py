"""ServiceAccount tokens: signed JWTs in the shape kube-apiserver issues through TokenRequest.

The server makes a fresh P-256 key at start (as a dev cluster, nothing outlives it), signs
tokens with ES256 and verifies them itself. Claims follow kube's bound tokens: `iss`, `sub`
= the service account user, `aud`, `exp`/`iat`/`nbf`, `jti`, and a `kubernetes.io` object with
the namespace, the service account (name, uid) and, for tokens bound to a pod, the pod
(name, uid). A kubelet's request of 3607 s is stretched to a year with a `warnafter` claim,
as kube does for the tokens it mounts into pods (the kubelet here does not rotate them).

A verified token is cached (claims and expiry), so a client presenting the same token on
every request pays for the signature once; whether its service account and pod still exist
is checked by the caller on every request, from the store.
"""

from __future__ import annotations

import base64
import hashlib
import time
import uuid
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

ISSUER = "https://kubernetes.default.svc.cluster.local"
API_AUDIENCES = (ISSUER,)
DEFAULT_EXPIRATION = 3600
MIN_EXPIRATION = 600
#: What a kubelet asks for; kube answers with a year-long token that warns after this.
KUBELET_EXPIRATION = 3607
EXTENDED_EXPIRATION = 365 * 24 * 3600
_CACHE_LIMIT = 4096


@dataclass(frozen=True)
class TokenClaims:
    """What a valid token says about its holder."""

    namespace: str
    name: str
    sa_uid: str
    expires: int
    jti: str
    pod_name: str = ""
    pod_uid: str = ""


@dataclass(frozen=True)
class Issued:
    token: str
    expires: int


class TokenIssuer:
    """Signs and verifies ServiceAccount tokens with a key made at start."""

    def __init__(self) -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        public = self._key.public_key()
        der = public.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        # kube's key id: the unpadded base64url SHA-256 of the public key's DER encoding.
        self.key_id = base64.urlsafe_b64encode(hashlib.sha256(der).digest()).decode().rstrip("=")
        self._public = public
        self._cache: dict[str, tuple[TokenClaims, tuple[str, ...]]] = {}

    def issue(
        self,
        *,
        namespace: str,
        name: str,
        sa_uid: str,
        audiences: tuple[str, ...] = API_AUDIENCES,
        expiration_seconds: int = DEFAULT_EXPIRATION,
        pod: tuple[str, str] | None = None,
        now: float | None = None,
    ) -> Issued:
        issued_at = int(time.time() if now is None else now)
        lifetime = expiration_seconds
        kube: dict[str, Any] = {
            "namespace": namespace,
            "serviceaccount": {"name": name, "uid": sa_uid},
        }
        if pod is not None:
            kube["pod"] = {"name": pod[0], "uid": pod[1]}
            if expiration_seconds == KUBELET_EXPIRATION:
                lifetime = EXTENDED_EXPIRATION
                kube["warnafter"] = issued_at + expiration_seconds
        claims = {
            "aud": list(audiences),
            "exp": issued_at + lifetime,
            "iat": issued_at,
            "nbf": issued_at,
            "iss": ISSUER,
            "jti": str(uuid.uuid4()),
            "kubernetes.io": kube,
            "sub": f"system:serviceaccount:{namespace}:{name}",
        }
        token = jwt.encode(claims, self._key, algorithm="ES256", headers={"kid": self.key_id})
        return Issued(token, issued_at + lifetime)

    def verify(self, token: str, audiences: tuple[str, ...] = API_AUDIENCES) -> TokenClaims | None:
        """The claims of a token this server signed, unexpired and meant for `audiences`;
        None for anything else (a foreign or tampered token, another audience)."""
        cached = self._cache.get(token)
        if cached is None:
            cached = self._decode(token)
            if cached is None:
                return None
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[token] = cached
        claims, token_audiences = cached
        if claims.expires <= time.time():
            self._cache.pop(token, None)
            return None
        if not set(audiences) & set(token_audiences):
            return None
        return claims

    def _decode(self, token: str) -> tuple[TokenClaims, tuple[str, ...]] | None:
        try:
            raw = jwt.decode(
                token,
                self._public,
                algorithms=["ES256"],
                issuer=ISSUER,
                options={"verify_aud": False, "require": ["exp", "iat", "sub", "iss"]},
            )
        except jwt.PyJWTError:
            return None
        kube = raw.get("kubernetes.io")
        if not isinstance(kube, dict):
            return None
        account = kube.get("serviceaccount") or {}
        pod = kube.get("pod") or {}
        audiences = raw.get("aud") or []
        if isinstance(audiences, str):
            audiences = [audiences]
        claims = TokenClaims(
            namespace=str(kube.get("namespace") or ""),
            name=str(account.get("name") or ""),
            sa_uid=str(account.get("uid") or ""),
            expires=int(raw["exp"]),
            jti=str(raw.get("jti") or ""),
            pod_name=str(pod.get("name") or ""),
            pod_uid=str(pod.get("uid") or ""),
        )
        if raw.get("sub") != f"system:serviceaccount:{claims.namespace}:{claims.name}":
            return None
        return claims, tuple(str(a) for a in audiences)
