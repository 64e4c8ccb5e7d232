"""`python -m tests.harness.differential [AREA ...] [--write] [--baseline] [--show STEP]`:
replay the corpus on both control planes, print the table and the disagreements; `--write`
also writes docs/differential.md (what the README quotes), `--baseline` records the agreeing
requests in baseline.txt (what the test holds to)."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

from . import corpus, report, run

DOC = Path(__file__).resolve().parents[3] / "docs" / "differential.md"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.harness.differential")
    parser.add_argument("areas", nargs="*", help="only these areas (file names, no .yaml)")
    parser.add_argument("--write", action="store_true", help="write docs/differential.md")
    parser.add_argument("--baseline", action="store_true", help="record the agreeing requests")
    parser.add_argument("--show", action="append", default=[], help="print both outcomes")
    args = parser.parse_args()
    areas = corpus.load(args.areas or None)
    started = time.monotonic()
    embedded, kubernetes = asyncio.run(run.both(areas))
    took = time.monotonic() - started
    found = report.verdicts(areas, embedded, kubernetes)
    for step in args.show:
        for name, outcomes in (("embedded", embedded), ("kubernetes", kubernetes)):
            print(f"--- {step} on {name}")
            print(json.dumps(outcomes[step].as_dict(), indent=1, sort_keys=True))
    text = report.table(areas, found)
    listed = report.disagreements(areas, found)
    print(text)
    print(listed)
    print(f"replayed in {took:.0f} s")
    if args.write:
        DOC.write_text(render(text, listed))
    if args.baseline:
        report.write_baseline(found)


def render(text: str, listed: str) -> str:
    return "\n".join(
        [
            "# The dev cluster measured against Kubernetes",
            "",
            "Written by `python -m tests.harness.differential --write` (issue #30, item 5).",
            "Each request of `tests/harness/differential/corpus/` is sent to the embedded",
            "control plane and to Kubernetes v1.37's own; the answers are compared on status",
            "code, reason, message, warnings and the stored object, after normalising what",
            "legitimately differs (tests/harness/differential/normalise.py).",
            "",
            text,
            "",
            "## Disagreements",
            "",
            "Each as `where: embedded | kubernetes`.",
            "",
            listed,
            "",
        ]
    )


if __name__ == "__main__":
    main()
