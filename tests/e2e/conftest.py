"""The e2e tests need the process runtime (Linux, root, unshare: tests/conftest.py marks them,
tests/harness/real_ray_tier.py skips them or, under CI=true, fails them) and the `ray` package."""

from __future__ import annotations

import importlib.util

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if importlib.util.find_spec("ray") is not None:
        return
    skip = pytest.mark.skip(reason="real Ray needs the ray package: pip install -e '.[ray]'")
    for item in items:
        if "tests/e2e/" in str(item.path).replace("\\", "/"):
            item.add_marker(skip)
