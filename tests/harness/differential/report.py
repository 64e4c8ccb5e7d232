"""Agreement of two replays: per request, per area, and the baseline the test holds to."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .corpus import Area
from .replay import Outcome

BASELINE = Path(__file__).resolve().parent / "baseline.txt"
ASPECTS = ("code", "reason", "message", "warnings", "body")


@dataclass(frozen=True)
class Verdict:
    step: str
    differences: list[str]  # "aspect: where: embedded | kubernetes", empty when they agree

    @property
    def agrees(self) -> bool:
        return not self.differences


def _short(value: Any, width: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= width else text[: width - 3] + "..."


def _pair(left: Any, right: Any) -> str:
    """Two differing values; two long strings from a little before where they part."""
    if isinstance(left, str) and isinstance(right, str) and min(len(left), len(right)) > 80:
        same = next(
            (i for i, (a, b) in enumerate(zip(left, right, strict=False)) if a != b),
            min(len(left), len(right)),
        )
        start = max(0, same - 40)
        if start:
            return f"...{_short(left[start:])} | ...{_short(right[start:])}"
    return f"{_short(left)} | {_short(right)}"


def differences(left: Any, right: Any, where: str = "") -> list[str]:
    """Where two JSON values differ, one line a leaf: `path: left | right`."""
    if isinstance(left, dict) and isinstance(right, dict):
        out: list[str] = []
        for key in sorted(set(left) | set(right), key=str):
            sub = f"{where}.{key}" if where else str(key)
            if key not in left:
                out.append(f"{sub}: <absent> | {_short(right[key])}")
            elif key not in right:
                out.append(f"{sub}: {_short(left[key])} | <absent>")
            else:
                out.extend(differences(left[key], right[key], sub))
        return out
    if isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
        return [
            line
            for i, (a, b) in enumerate(zip(left, right, strict=True))
            for line in differences(a, b, f"{where}[{i}]")
        ]
    if left != right:
        return [f"{where or '.'}: {_pair(left, right)}"]
    return []


def judge(step: str, embedded: Outcome, kubernetes: Outcome) -> Verdict:
    ours, theirs = embedded.as_dict(), kubernetes.as_dict()
    found: list[str] = []
    for aspect in ASPECTS:
        if aspect == "body":
            found.extend(f"body {d}" for d in differences(ours["body"], theirs["body"]))
        elif ours[aspect] != theirs[aspect]:
            found.append(f"{aspect}: {_pair(ours[aspect], theirs[aspect])}")
    return Verdict(step, found)


def verdicts(
    areas: list[Area], embedded: dict[str, Outcome], kubernetes: dict[str, Outcome]
) -> list[Verdict]:
    return [judge(s.id, embedded[s.id], kubernetes[s.id]) for area in areas for s in area.steps]


def table(areas: list[Area], found: list[Verdict]) -> str:
    """The README's table: requests, agree, disagree per area, and the total."""
    by_step = {v.step: v for v in found}
    rows = ["| area | requests | agree | disagree |", "| --- | ---: | ---: | ---: |"]
    total = agree = 0
    for area in areas:
        ok = sum(by_step[s.id].agrees for s in area.steps)
        rows.append(f"| {area.title} | {len(area.steps)} | {ok} | {len(area.steps) - ok} |")
        total += len(area.steps)
        agree += ok
    rows.append(f"| **all** | **{total}** | **{agree}** | **{total - agree}** |")
    return "\n".join(rows)


def disagreements(areas: list[Area], found: list[Verdict]) -> str:
    """Each disagreement, its differences as `where: embedded | kubernetes`, and the step's
    note (why it differs, where that is known)."""
    notes = {s.id: s.note for area in areas for s in area.steps}
    lines: list[str] = []
    for verdict in found:
        if verdict.agrees:
            continue
        note = notes[verdict.step]
        lines.append(f"- `{verdict.step}`" + (f": {note}" if note else ""))
        shown = verdict.differences[:6]
        lines.extend(f"  - `{d}`" for d in shown)
        if len(verdict.differences) > len(shown):
            lines.append(f"  - ... {len(verdict.differences) - len(shown)} more")
    return "\n".join(lines) or "None."


def read_baseline() -> set[str]:
    if not BASELINE.exists():
        return set()
    lines = (line.strip() for line in BASELINE.read_text().splitlines())
    return {line for line in lines if line and not line.startswith("#")}


def write_baseline(found: list[Verdict]) -> None:
    agreeing = sorted(v.step for v in found if v.agrees)
    BASELINE.write_text(
        "# Requests of the differential corpus on which the embedded control plane agrees\n"
        "# with Kubernetes' (python -m tests.harness.differential --baseline).\n"
        + "\n".join(agreeing)
        + "\n"
    )
