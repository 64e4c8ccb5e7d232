"""Kubernetes protobuf request bodies, decoded into the JSON the rest of the server reads.

kubectl's typed commands (`kubectl create pdb|quota|job|deployment|namespace|...`, `kubectl
create token`, `kubectl auth can-i`, `kubectl drain`'s evictions) send protobuf, not JSON. A
server that refuses them is not kube-apiserver, so every built-in kind the server serves is
decoded: the field numbers, JSON names and value shapes of each Go type come from
``protobuf_types.json``, generated from the Go struct tags of ``k8s.io/api`` that the kubectl
binary carries (``deploy/k8s_protobuf.py``). The result is what Go's JSON encoding of the
decoded struct would print: a pointer field present in the message is kept even when zero,
an ``omitempty`` scalar at its zero value is dropped, as Go drops it.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import Any

MAGIC = b"k8s\x00"

Field = tuple[int, int, Any]  # number, wire type, value (int or bytes)

#: Kinds answered but never stored (reviews), which kubectl also sends as protobuf.
REVIEW_KINDS = (
    ("authentication.k8s.io/v1", "TokenRequest"),
    ("authentication.k8s.io/v1", "SelfSubjectReview"),
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"),
    ("authorization.k8s.io/v1", "SubjectAccessReview"),
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"),
    ("policy/v1", "Eviction"),
)


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


@cache
def _table() -> dict[str, Any]:
    text = resources.files("devkube.server.schema").joinpath("protobuf_types.json").read_text()
    table: dict[str, Any] = json.loads(text)
    return table


def _signed(value: int) -> int:
    """Go's int32/int64 travel as two's complement varints."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _scalar(shape: str, wire: int, value: Any) -> Any:
    if shape == "string":
        return bytes(value).decode()
    if shape == "bytes":
        return base64.b64encode(bytes(value)).decode()
    if shape == "int":
        return _signed(int(value))
    if shape == "bool":
        return bool(value)
    if shape == "float64":
        return struct.unpack("<d", bytes(value))[0]
    if shape == "float32":
        return struct.unpack("<f", bytes(value))[0]
    return _special(shape, bytes(value))


def _numbers(buf: bytes) -> dict[int, Any]:
    return {number: value for number, _, value in fields(buf)}


def _special(shape: str, buf: bytes) -> Any:
    """The Go types whose protobuf form is written by hand in apimachinery."""
    parts = _numbers(buf)
    if shape == "quantity":
        return bytes(parts.get(1, b"")).decode()
    if shape == "intorstring":
        if parts.get(1, 0) == 1:
            return bytes(parts.get(3, b"")).decode()
        return _signed(int(parts.get(2, 0)))
    if shape in ("time", "microtime"):
        seconds, nanos = _signed(int(parts.get(1, 0))), int(parts.get(2, 0))
        if not seconds and not nanos:
            return None  # the zero time, which Go prints as null
        moment = datetime.fromtimestamp(seconds, UTC)
        if shape == "time":
            return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
        return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos // 1000:06d}Z"
    if shape == "duration":
        return _go_duration(_signed(int(parts.get(1, 0))))
    if shape == "rawjson":
        raw = bytes(parts.get(1, b""))
        try:
            return json.loads(raw) if raw else None
        except ValueError as exc:
            raise ProtobufError("an embedded object is not JSON") from exc
    raise ProtobufError(f"unknown value shape {shape}")


def _go_duration(nanos: int) -> str:
    """Go's time.Duration.String() for whole seconds and below (what metav1.Duration prints)."""
    sign, nanos = ("-", -nanos) if nanos < 0 else ("", nanos)
    hours, rest = divmod(nanos, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    seconds = rest / 10**9
    text = f"{seconds:g}s"
    if hours:
        return f"{sign}{hours}h{minutes}m{text}"
    return f"{sign}{minutes}m{text}" if minutes else sign + text


def _zero(value: Any) -> bool:
    return value in ("", 0, False, None) or value == [] or value == {}


def _value(shape: Any, wire: int, value: Any) -> Any:
    if isinstance(shape, str):
        return _scalar(shape, wire, value)
    if "message" in shape:
        return message(shape["message"], bytes(value))
    if "map" in shape:
        return _entry(shape["map"], bytes(value))
    raise ProtobufError(f"unexpected value shape {shape}")


def _entry(shapes: list[Any], buf: bytes) -> tuple[Any, Any]:
    """One map entry: key 1, value 2; a slice value travels wrapped as `items` (1)."""
    key_shape, value_shape = shapes
    key: Any = _zero_of(key_shape)
    item: Any = _zero_of(value_shape)
    for number, wire, value in fields(buf):
        if number == 1:
            key = _value(key_shape, wire, value)
        elif number == 2 and isinstance(value_shape, dict) and "list" in value_shape:
            item = [_value(value_shape["list"], w, v) for n, w, v in fields(bytes(value)) if n == 1]
        elif number == 2:
            item = _value(value_shape, wire, value)
    return key, item


def _zero_of(shape: Any) -> Any:
    if shape == "string":
        return ""
    if shape in ("int", "float64", "float32"):
        return 0
    if shape == "bool":
        return False
    if isinstance(shape, dict) and "list" in shape:
        return []
    return {} if isinstance(shape, dict) else None


def _repeated(shape: Any, wire: int, value: Any) -> list[Any]:
    """One occurrence of a repeated field; numbers may come packed."""
    if wire == 2 and shape in ("int", "bool"):
        out, pos, buf = [], 0, bytes(value)
        while pos < len(buf):
            number, pos = _varint(buf, pos)
            out.append(_scalar(shape, 0, number))
        return out
    return [_value(shape, wire, value)]


def message(type_key: str, buf: bytes) -> dict[str, Any]:
    """The JSON form of one message of the Go type ``type_key``."""
    spec = _table()["messages"].get(type_key)
    if spec is None:
        raise ProtobufError(f"no protobuf table for {type_key}")
    out: dict[str, Any] = {}
    for number, wire, value in fields(buf):
        known = spec.get(str(number))
        if known is None:
            continue  # a field newer than our table: Go's decoder skips it too
        name, shape, flags = known
        if isinstance(shape, dict) and "list" in shape:
            out.setdefault(name, []).extend(_repeated(shape["list"], wire, value))
        elif isinstance(shape, dict) and "map" in shape:
            key, item = _entry(shape["map"], bytes(value))
            out.setdefault(name, {})[key] = item
        else:
            decoded = _value(shape, wire, value)
            dropped = "p" not in flags and "o" in flags and isinstance(shape, str)
            if decoded is None or (dropped and _zero(decoded)):
                out.pop(name, None)
                continue
            out[name] = decoded
    return out


def decode(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded built-in object (else ProtobufError)."""
    if not body.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf envelope")
    api_version = kind = ""
    raw = b""
    for number, _, value in fields(body[len(MAGIC) :]):
        if number == 1:
            for sub, _, item in fields(value):
                if sub == 1:
                    api_version = bytes(item).decode()
                elif sub == 2:
                    kind = bytes(item).decode()
        elif number == 2:
            raw = bytes(value)
    type_key = _table()["kinds"].get(f"{api_version}/{kind}")
    if type_key is None:
        raise ProtobufError(f"protobuf bodies of {api_version}/{kind} are not supported")
    obj = message(type_key, raw)
    return {"apiVersion": api_version, "kind": kind, **obj}
