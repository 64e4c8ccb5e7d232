"""The Ray versions we claim are the versions we test (docs/design.md §9.3, §10.1).

The autoscaler sidecar's slice correction wraps Ray internals and is written for the minor
versions in ``slice_autoscaler.CORRECTED_VERSIONS``; its tests (tests/ray/) run against the
installed Ray. Four statements must agree, and a run fails, never skips, when they do not:
the ``ray`` requirements of pyproject.toml admit exactly those minors, the README's
compatibility table names them, and the installed Ray is one of them.
"""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

from raycluster_operator.sidecar import slice_autoscaler

ROOT = Path(__file__).resolve().parents[1]
#: "2.60." -> "2.60"
PROVEN = [v.rstrip(".") for v in slice_autoscaler.CORRECTED_VERSIONS]


def ray_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found = [
        Requirement(line)
        for extra in project["optional-dependencies"].values()
        for line in extra
        if Requirement(line).name == "ray"
    ]
    assert found, "pyproject.toml declares no ray requirement"
    return found


def test_the_installed_ray_is_a_proven_one() -> None:
    installed = Version(importlib.metadata.version("ray"))
    assert f"{installed.major}.{installed.minor}" in PROVEN, (
        f"Ray {installed} is installed; the suite proves Ray {', '.join(PROVEN)} only "
        "(pip install -e '.[test]' installs a proven one)"
    )
    assert slice_autoscaler.corrected(str(installed))


def test_pyproject_admits_exactly_the_proven_minors() -> None:
    for requirement in ray_requirements():
        spec = requirement.specifier
        for minor in PROVEN:
            major, low = map(int, minor.split("."))
            assert spec.contains(f"{major}.{low}.0"), (requirement, minor)
            assert spec.contains(f"{major}.{low}.9"), (requirement, minor)
        # Nothing outside them: the neighbours of every proven minor, and far ones.
        outside = {f"2.{n}.0" for n in range(30, 100)} | {"3.0.0", "1.13.0"}
        outside -= {f"{m}.0" for m in PROVEN}
        admitted = sorted(v for v in outside if spec.contains(v))
        assert not admitted, f"{requirement} admits unproven Ray {admitted}"


def test_the_readme_names_the_proven_versions() -> None:
    readme = (ROOT / "README.md").read_text()
    row = re.search(r"^\| Ray \(the `ray` extra\) \| (?P<status>[^|]+)\|", readme, re.M)
    assert row is not None, "the README's compatibility table has no Ray row"
    named = re.findall(r"\b(\d+\.\d+)\.x\b", row["status"])
    assert named == PROVEN
