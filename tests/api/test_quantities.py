"""Quantities read exactly as the Kubernetes client reads them."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from raycluster_operator.api.quantities import container_limit_or_request, parse_quantity

kubernetes_utils = pytest.importorskip("kubernetes.utils")

SUFFIXES = ["", "m", "k", "M", "G", "T", "Ki", "Mi", "Gi", "Ti", "e3", "E2"]


@given(
    st.decimals(min_value=0, max_value=10**6, places=3, allow_nan=False), st.sampled_from(SUFFIXES)
)
def test_parse_quantity_agrees_with_the_kubernetes_client(number: Decimal, suffix: str) -> None:
    text = f"{number}{suffix}"
    assert parse_quantity(text) == Fraction(kubernetes_utils.parse_quantity(text))


@pytest.mark.parametrize("bad", ["", "abc", "1.2.3", "5Q", True, None, "1 Gi"])
def test_rejects_what_kubernetes_rejects(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_quantity(bad)


def test_limit_falls_back_to_request() -> None:
    container = {"resources": {"requests": {"cpu": "500m"}, "limits": {"memory": "1Gi"}}}
    assert container_limit_or_request(container, "cpu") == Fraction(1, 2)
    assert container_limit_or_request(container, "memory") == 2**30
    assert container_limit_or_request({}, "cpu") == 0
