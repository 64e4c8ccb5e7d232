"""A node's pod IPs: every address of its podCIDR but the gateway, lowest free first, and no
cost before its pods come (docs/design.md §8: the dev cluster costs O(the change))."""

from __future__ import annotations

import ipaddress

import pytest

from devkube.kubelet.agent import _IpPool


def _drain(pool: _IpPool) -> list[str]:
    taken: list[str] = []
    with pytest.raises(RuntimeError, match="exhausted"):
        while True:
            taken.append(pool.take())
    return taken


@pytest.mark.parametrize(
    "cidr", ["10.1.2.0/24", "10.1.2.0/30", "10.1.2.0/31", "10.1.2.4/32", "fd00::/120", ""]
)
def test_a_pool_hands_out_every_host_address_but_the_gateway_in_order(cidr: str) -> None:
    network = ipaddress.ip_network(cidr or "10.255.0.0/24")
    assert _drain(_IpPool(cidr)) == [str(ip) for ip in list(network.hosts())[1:]]


def test_returned_addresses_are_taken_again_lowest_first() -> None:
    pool = _IpPool("10.0.0.0/24")
    taken = [pool.take() for _ in range(5)]
    assert taken[0] == "10.0.0.2"
    pool.give(taken[3])
    pool.give(taken[1])
    assert [pool.take(), pool.take(), pool.take()] == [taken[1], taken[3], "10.0.0.7"]


def test_a_huge_range_is_not_listed_up_front() -> None:
    """A /8 has 16 million addresses: listing them would take seconds and a gigabyte."""
    pool = _IpPool("10.0.0.0/8")
    assert [pool.take(), pool.take()] == ["10.0.0.2", "10.0.0.3"]
