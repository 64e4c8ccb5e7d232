"""Derived names: always within limits, valid, unchanged when short, distinct when inputs are."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from raycluster_operator.api import names

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

# Valid DNS-1123 labels of any length up to 63: what validation lets through as group names.
labels = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
suffixes = st.sampled_from(["-headless", "-head-svc", "-3-0", "-127-15", "-bcd2f", "-0"])


@given(labels, suffixes)
def test_fit_is_a_dns_label_within_limit(name: str, suffix: str) -> None:
    out = names.fit(name, suffix=suffix)
    assert len(out) <= names.DNS_LABEL_MAX
    assert DNS_LABEL.match(out), out
    assert out.endswith(suffix)


@given(labels, suffixes)
def test_fit_is_deterministic(name: str, suffix: str) -> None:
    assert names.fit(name, suffix=suffix) == names.fit(name, suffix=suffix)


@given(labels, suffixes)
def test_short_names_are_unchanged(name: str, suffix: str) -> None:
    if len(name) + len(suffix) <= names.DNS_LABEL_MAX:
        assert names.fit(name, suffix=suffix) == name + suffix


@given(st.lists(labels, min_size=2, max_size=30, unique=True), suffixes)
def test_distinct_inputs_give_distinct_names(inputs: list[str], suffix: str) -> None:
    outs = {names.fit(n, suffix=suffix) for n in inputs}
    assert len(outs) == len(inputs)


def test_long_names_sharing_a_prefix_stay_distinct() -> None:
    base = "a" * 70
    outs = {names.host_name(base + str(i), 0, 0) for i in range(200)}
    assert len(outs) == 200


@given(labels, st.integers(0, 10_000), st.integers(0, 1_000))
def test_hostnames_of_one_group_are_distinct_per_replica_and_host(
    group: str, r: int, h: int
) -> None:
    a = names.host_name(group, r, h)
    assert a != names.host_name(group, r + 1, h)
    assert a != names.host_name(group, r, h + 1)
    assert len(a) <= 63 and DNS_LABEL.match(a)


def test_derived_names_when_short() -> None:
    assert names.head_service_name("demo") == "demo-head-svc"
    assert names.headless_service_name("demo") == "demo-headless"
    assert names.slice_name("tpu", 3) == "tpu-3"
    assert names.host_name("tpu", 3, 1) == "tpu-3-1"
    assert names.replica_name("tpu", "bcd2f") == "tpu-bcd2f"
    assert names.worker_generate_name("demo", "tpu") == "demo-tpu-worker-"
    assert names.head_generate_name("demo") == "demo-head-"


def test_generate_name_is_cut_like_kuberay() -> None:
    out = names.worker_generate_name("c" * 40, "g" * 40)
    assert out == ("c" * 40 + "-" + "g" * 9) + "-worker-"


def test_shortening_keeps_the_suffix_and_a_digest_of_the_full_name() -> None:
    long = "x" * 60
    out = names.headless_service_name(long)
    assert len(out) == 63
    assert out.endswith("-headless")
    assert out != names.headless_service_name("x" * 61)
