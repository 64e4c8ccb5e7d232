"""The corpus as data: areas of steps read from `corpus/*.yaml`.

A step is one API request and what of its answer to compare. Keeping requests as data (not
test functions) lets one driver replay every one of them on both control planes and count
agreement per area.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

CORPUS = Path(__file__).resolve().parent / "corpus"

#: Content types by a step's `type:` shorthand.
CONTENT_TYPES = {
    "json": "application/json",
    "merge": "application/merge-patch+json",
    "jsonpatch": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}


@dataclass(frozen=True)
class Step:
    """One request. `path` may name `{ns}` (the area's namespace) and `{saved.KEY}` (a value
    an earlier step saved); `until` polls the request (a GET) until every path holds its value
    or `within` seconds pass, and the last answer is the one compared. `within` is a hang
    guard, long enough that load never decides a verdict (a pod Ready on a machine at load 20
    took over 30 s); a step known to disagree may set it short."""

    area: str
    name: str
    method: str
    path: str
    body: Any = None
    type: str = "json"
    params: dict[str, str] = field(default_factory=dict)
    identity: str = ""  # a ServiceAccount of the area's namespace; "" is the cluster admin
    until: dict[str, Any] = field(default_factory=dict)
    within: float = 150.0
    compare: list[str] = field(default_factory=list)  # only these paths of the body
    ignore: list[str] = field(default_factory=list)  # these paths of the body left out
    save: dict[str, str] = field(default_factory=dict)  # KEY: path of the answer's body
    events: int = 0  # WATCH: how many events to read (0: until the server ends the watch)
    note: str = ""

    @property
    def id(self) -> str:
        return f"{self.area}/{self.name}"


@dataclass(frozen=True)
class Area:
    """A file of the corpus: its steps run in order in a namespace of its own, labelled
    `namespace_labels` (Pod Security levels)."""

    name: str
    title: str
    namespace: str
    namespace_labels: dict[str, str]
    steps: list[Step]
    #: Compare `metadata.managedFields` (the server-side apply area); elsewhere they are left
    #: out, so that the embedded server's one known gap there (it keeps none) is counted once
    #: rather than on every write.
    managed_fields: bool = False


def _step(area: str, raw: dict[str, Any]) -> Step:
    method, _, path = str(raw.pop("do")).partition(" ")
    known = set(Step.__dataclass_fields__) - {"area", "method", "path", "identity"}
    identity = str(raw.pop("as", ""))
    unknown = set(raw) - known
    if unknown:
        raise ValueError(f"{area}/{raw.get('name')}: unknown keys {sorted(unknown)}")
    params = {k: str(v) for k, v in (raw.pop("params", None) or {}).items()}
    return Step(
        area=area, method=method, path=path.strip(), identity=identity, params=params, **raw
    )


def load_area(path: Path) -> Area:
    raw = yaml.safe_load(path.read_text())
    name = path.stem
    steps = [_step(name, dict(s)) for s in raw["steps"]]
    ids = [s.id for s in steps]
    duplicates = {i for i in ids if ids.count(i) > 1}
    if duplicates:
        raise ValueError(f"{path.name}: duplicate step names {sorted(duplicates)}")
    return Area(
        name=name,
        title=str(raw.get("title", name)),
        namespace=str(raw.get("namespace", f"d-{name}")),
        namespace_labels={str(k): str(v) for k, v in (raw.get("namespace_labels") or {}).items()},
        steps=steps,
        managed_fields=bool(raw.get("managed_fields", False)),
    )


def load(names: list[str] | None = None) -> list[Area]:
    """Every area of the corpus (or those named), in file-name order."""
    files = sorted(CORPUS.glob("*.yaml"))
    if names:
        files = [f for f in files if f.stem in names]
    return [load_area(f) for f in files]
