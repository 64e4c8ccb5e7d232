"""The e2e tests need the process runtime (Linux, root, unshare) and the `ray` package."""

from __future__ import annotations

import importlib.util

import pytest

from devkube.process import process_runtime_available


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    ok, why = process_runtime_available()
    if ok and importlib.util.find_spec("ray") is None:
        ok, why = False, "the ray package is not installed"
    if ok:
        return
    skip = pytest.mark.skip(reason=f"real Ray needs the dev cluster's process runtime: {why}")
    for item in items:
        if "tests/e2e/" in str(item.path).replace("\\", "/"):
            item.add_marker(skip)
