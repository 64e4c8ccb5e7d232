"""Just enough Kubernetes protobuf to accept what kubectl's typed commands send.

kubectl encodes built-in objects as protobuf in commands like `kubectl create namespace`,
`kubectl create configmap`, `kubectl create secret`, `kubectl create token` and
`kubectl auth can-i`. Without the generated schemas we
decode only those few small kinds, by field number, into the JSON shape; anything else is
answered 415 by the caller.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from typing import Any

MAGIC = b"k8s\x00"

Field = tuple[int, int, Any]  # number, wire type, value (int or bytes)


class ProtobufError(ValueError):
    pass


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ProtobufError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def fields(buf: bytes) -> Iterator[Field]:
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
            yield number, wire, value
        elif wire == 2:
            size, pos = _varint(buf, pos)
            if pos + size > len(buf):
                raise ProtobufError("truncated field")
            yield number, wire, buf[pos : pos + size]
            pos += size
        elif wire == 1:
            yield number, wire, buf[pos : pos + 8]
            pos += 8
        elif wire == 5:
            yield number, wire, buf[pos : pos + 4]
            pos += 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")


def _text(value: Any) -> str:
    return bytes(value).decode()


def _entry(value: bytes) -> tuple[str, bytes]:
    key, raw = "", b""
    for number, _, item in fields(value):
        if number == 1:
            key = _text(item)
        elif number == 2:
            raw = bytes(item)
    return key, raw


def _owner(value: bytes) -> dict[str, Any]:
    names = {1: "kind", 3: "name", 4: "uid", 5: "apiVersion"}
    ref: dict[str, Any] = {}
    for number, _, item in fields(value):
        if number in names:
            ref[names[number]] = _text(item)
        elif number == 6:
            ref["controller"] = bool(item)
        elif number == 7:
            ref["blockOwnerDeletion"] = bool(item)
    return ref


def object_meta(buf: bytes) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    strings = {1: "name", 2: "generateName", 3: "namespace", 6: "resourceVersion"}
    for number, _, value in fields(buf):
        if number in strings:
            if value:  # proto2 writes unset optional strings as empty
                meta[strings[number]] = _text(value)
        elif number in (11, 12):
            key, raw = _entry(value)
            meta.setdefault("labels" if number == 11 else "annotations", {})[key] = raw.decode()
        elif number == 13:
            meta.setdefault("ownerReferences", []).append(_owner(value))
        elif number == 14:
            meta.setdefault("finalizers", []).append(_text(value))
    return meta


def _configmap(obj: dict[str, Any], number: int, value: Any) -> None:
    if number in (2, 3):
        key, raw = _entry(value)
        if number == 2:
            obj.setdefault("data", {})[key] = raw.decode()
        else:
            obj.setdefault("binaryData", {})[key] = base64.b64encode(raw).decode()
    elif number == 4:
        obj["immutable"] = bool(value)


def _secret(obj: dict[str, Any], number: int, value: Any) -> None:
    if number in (2, 4):
        key, raw = _entry(value)
        if number == 2:
            obj.setdefault("data", {})[key] = base64.b64encode(raw).decode()
        else:
            obj.setdefault("stringData", {})[key] = raw.decode()
    elif number == 3 and value:
        obj["type"] = _text(value)
    elif number == 5:
        obj["immutable"] = bool(value)


def _metadata_only(obj: dict[str, Any], number: int, value: Any) -> None:
    return None


def _strings(buf: bytes, names: dict[int, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, _, value in fields(buf):
        if number in names and value:
            out[names[number]] = _text(value)
    return out


_RESOURCE_ATTRIBUTES = {
    1: "namespace",
    2: "verb",
    3: "group",
    4: "version",
    5: "resource",
    6: "subresource",
    7: "name",
}
_NON_RESOURCE_ATTRIBUTES = {1: "path", 2: "verb"}


def _access_review_spec(buf: bytes) -> dict[str, Any]:
    """(Self)SubjectAccessReviewSpec: what `kubectl auth can-i` asks."""
    spec: dict[str, Any] = {}
    for number, _, value in fields(buf):
        if number == 1:
            spec["resourceAttributes"] = _strings(value, _RESOURCE_ATTRIBUTES)
        elif number == 2:
            spec["nonResourceAttributes"] = _strings(value, _NON_RESOURCE_ATTRIBUTES)
        elif number == 3 and value:
            spec["user"] = _text(value)
        elif number == 4:
            spec.setdefault("groups", []).append(_text(value))
        elif number == 6 and value:
            spec["uid"] = _text(value)
    return spec


def _rules_review_spec(buf: bytes) -> dict[str, Any]:
    return _strings(buf, {1: "namespace"})


_BOUND_OBJECT = {1: "kind", 2: "apiVersion", 3: "name", 4: "uid"}


def _token_request_spec(buf: bytes) -> dict[str, Any]:
    """TokenRequestSpec: audiences (1), boundObjectRef (3), expirationSeconds (4)."""
    spec: dict[str, Any] = {}
    for number, _, value in fields(buf):
        if number == 1:
            spec.setdefault("audiences", []).append(_text(value))
        elif number == 3:
            spec["boundObjectRef"] = _strings(value, _BOUND_OBJECT)
        elif number == 4:
            spec["expirationSeconds"] = int(value)
    return spec


Decoder = Callable[[dict[str, Any], int, Any], None]

_POLICY_RULE = {
    1: "verbs",
    2: "apiGroups",
    3: "resources",
    4: "resourceNames",
    5: "nonResourceURLs",
}


def _policy_rule(buf: bytes) -> dict[str, Any]:
    rule: dict[str, Any] = {}
    for number, _, value in fields(buf):
        if number in _POLICY_RULE:
            rule.setdefault(_POLICY_RULE[number], []).append(_text(value))
    return rule


def _role(obj: dict[str, Any], number: int, value: Any) -> None:
    """Role and ClusterRole: rules (2); a ClusterRole's aggregationRule (3) is refused."""
    if number == 2:
        obj.setdefault("rules", []).append(_policy_rule(bytes(value)))
    elif number == 3:
        raise ProtobufError("aggregationRule is not supported")


def _binding(obj: dict[str, Any], number: int, value: Any) -> None:
    """RoleBinding and ClusterRoleBinding: subjects (2) and roleRef (3)."""
    if number == 2:
        subject = _strings(bytes(value), {1: "kind", 2: "apiGroup", 3: "name", 4: "namespace"})
        obj.setdefault("subjects", []).append(subject)
    elif number == 3:
        obj["roleRef"] = _strings(bytes(value), {1: "apiGroup", 2: "kind", 3: "name"})


def _with_spec(decode_spec: Callable[[bytes], dict[str, Any]]) -> Decoder:
    def handler(obj: dict[str, Any], number: int, value: Any) -> None:
        if number == 2:
            obj["spec"] = decode_spec(bytes(value))

    return handler


_KINDS: dict[tuple[str, str], Callable[[dict[str, Any], int, Any], None]] = {
    ("v1", "Namespace"): _metadata_only,
    ("v1", "ConfigMap"): _configmap,
    ("v1", "Secret"): _secret,
    ("v1", "ServiceAccount"): _metadata_only,
    # `kubectl create role|clusterrole|rolebinding|clusterrolebinding`.
    ("rbac.authorization.k8s.io/v1", "Role"): _role,
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): _role,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): _binding,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): _binding,
    # What `kubectl create token`, `kubectl auth can-i` and `kubectl auth whoami` send.
    ("authentication.k8s.io/v1", "TokenRequest"): _with_spec(_token_request_spec),
    ("authentication.k8s.io/v1", "SelfSubjectReview"): _metadata_only,
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): _with_spec(_access_review_spec),
    ("authorization.k8s.io/v1", "SubjectAccessReview"): _with_spec(_access_review_spec),
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"): _with_spec(_rules_review_spec),
}


def decode(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object of a supported kind (else ProtobufError)."""
    if not body.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf envelope")
    api_version = kind = ""
    raw = b""
    for number, _, value in fields(body[len(MAGIC) :]):
        if number == 1:
            for sub, _, item in fields(value):
                if sub == 1:
                    api_version = _text(item)
                elif sub == 2:
                    kind = _text(item)
        elif number == 2:
            raw = bytes(value)
    handler = _KINDS.get((api_version, kind))
    if handler is None:
        raise ProtobufError(f"protobuf bodies of {api_version}/{kind} are not supported")
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind}
    for number, _, value in fields(raw):
        if number == 1:
            obj["metadata"] = object_meta(value)
        else:
            handler(obj, number, value)
    return obj
