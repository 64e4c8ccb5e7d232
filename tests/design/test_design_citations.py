"""Code cites docs/design.md by rule ("rule 8a", "rules 8-13") and by section ("§7",
"docs/design.md, §3.8"); a citation of a rule or section the design does not have points a
reader nowhere, so it fails here. Rules are the numbered items of §4; sections are the
numbered headings."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
#: Where citations are checked: the code, its tests and its benchmarks.
CITING = ("src", "tests", "benchmarks")

_HEADING = re.compile(r"^#{2,4} (\d+(?:\.\d+)*)[. ]", re.M)
_RULE_ITEM = re.compile(r"^(\d+[a-z]?)\. ", re.M)
_RULE_ID = r"\d+[a-z]?"
#: "rule 8a", "rules 8-13", "rules 4-5, 12a", "rules 8a and 8b".
_RULES = re.compile(
    rf"\b[Rr]ules? ({_RULE_ID}(?:(?:\s*[-\u2013,/]\s*|\s+and\s+|\s+or\s+){_RULE_ID})*)\b"
)
_SECTION = re.compile(r"§\s?(\d+(?:\.\d+)*)")


def design_sections(text: str) -> set[str]:
    return set(_HEADING.findall(text))


def design_rules(text: str) -> set[str]:
    """The numbered items of §4 ("8.", "8a."), the only numbered rules."""
    start = text.index("\n## 4. ")
    end = text.index("\n## 5. ", start)
    return set(_RULE_ITEM.findall(text[start:end]))


def cited_rules(text: str) -> list[str]:
    """Every rule a text cites; a range cites its two ends."""
    flat = re.sub(r"\s*\n\s*(?:#+\s*)?", " ", text)  # a citation may wrap a comment line
    out: list[str] = []
    for match in _RULES.finditer(flat):
        out += re.findall(_RULE_ID, match.group(1))
    return out


def cited_sections(text: str) -> list[str]:
    return _SECTION.findall(text)


def bad_citations(path: Path, rules: set[str], sections: set[str]) -> list[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    bad = [f"{path}: rule {r}" for r in cited_rules(text) if r not in rules]
    bad += [f"{path}: §{s}" for s in cited_sections(text) if s not in sections]
    return bad


def citing_files() -> list[Path]:
    """Every Python file of the code, tests and benchmarks but this one (it cites on
    purpose what the design lacks)."""
    here = Path(__file__).resolve()
    return sorted(
        p for top in CITING for p in (ROOT / top).rglob("*.py") if p.is_file() and p != here
    )


def test_every_cited_rule_and_section_is_in_the_design() -> None:
    text = DESIGN.read_text(encoding="utf-8")
    rules, sections = design_rules(text), design_sections(text)
    bad = [b for path in citing_files() for b in bad_citations(path, rules, sections)]
    assert not bad, "citations of rules or sections docs/design.md does not have:\n" + "\n".join(
        bad
    )


def test_the_checker_finds_a_missing_rule_and_section(tmp_path: Path) -> None:
    """The check can fail: a rule and a section the design lacks are found, wrapped or not."""
    text = DESIGN.read_text(encoding="utf-8")
    rules, sections = design_rules(text), design_sections(text)
    assert {"8", "8a", "8b", "12a", "13a"} <= rules and "8c" not in rules
    assert {"3.8", "7"} <= sections and "3.99" not in sections
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""docs/design.md, §3.99: see rules 8-13 and\n# 8c, and rule 99."""\n'
        "# docs/design.md §7 rule 12a\n"
    )
    found = [line.split(": ", 1)[1] for line in bad_citations(sample, rules, sections)]
    assert found == ["rule 8c", "rule 99", "§3.99"]
