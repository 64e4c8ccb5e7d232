"""A failing test's report never takes the run down with it (a pytest plugin, loaded by
tests/conftest.py; issue #36).

CPython 3.11.7 (this machine's) can raise ``SystemError: AST constructor recursion depth
mismatch`` from ``ast.parse`` (CPython's gh-106905: the check's counter is not kept per call).
pytest renders a failure's traceback with ``ast.parse``, so the error comes out of
``pytest_runtest_makereport``, and pytest-xdist ends the whole run with an INTERNALERROR: in a
proof run under load, one failure hid every result after it. It is a passing clash, so the
report is made again; if it clashes twice, the failure is reported with a plain traceback
instead of pytest's rendering."""

from __future__ import annotations

import traceback
from collections.abc import Generator

import pytest

CLASH = "AST constructor recursion depth mismatch"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    try:
        return (yield)
    except SystemError as error:
        if CLASH not in str(error):
            raise
        try:
            return pytest.TestReport.from_item_and_call(item, call)
        except SystemError as again:
            if CLASH not in str(again):
                raise
            return _plain(item, call, again)


def _plain(item: pytest.Item, call: pytest.CallInfo[None], error: SystemError) -> pytest.TestReport:
    excinfo = call.excinfo
    assert excinfo is not None  # a passing call renders no traceback
    try:
        text = "".join(traceback.format_exception(excinfo.value))
    except SystemError:
        text = f"{excinfo.typename}: {excinfo.value}"
    return pytest.TestReport(
        item.nodeid,
        item.location,
        dict.fromkeys(item.keywords, 1),
        "failed",
        f"{text}\n(pytest's rendering of this failure hit {error}; shown plain)",
        call.when,
        duration=call.duration,
        start=call.start,
        stop=call.stop,
        user_properties=item.user_properties,
    )
