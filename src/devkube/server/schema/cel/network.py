"""Kubernetes' CEL ``ip``, ``cidr`` and ``url`` libraries (``k8s.io/apiserver/pkg/cel/library``)
for the dev cluster's CEL rules (docs/design.md §8, "CEL rules").

cel-expr-python cannot hand an opaque type across to Python, so an IP, a CIDR and a URL are
CEL maps holding their canonical text: ``{true: "<ip>"}`` for an IP, ``{false: "<cidr>"}``
for a CIDR (one map type, since the runtime picks a Python function by argument kinds and both
have a ``string()``), ``{0: "<url>"}`` for a URL. Two IPs compare equal as kube's do because
the text is Go's canonical form. What this costs: the type checker takes a CIDR where an IP
is wanted (kube refuses the rule; here it fails when evaluated).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from cel_expr_python import cel  # type: ignore[import-untyped]

_T = cel.Type
NET = _T.Map(_T.BOOL, _T.STRING)
URL = _T.Map(_T.INT, _T.STRING)
_IP_KEY = True
_CIDR_KEY = False

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Interface | ipaddress.IPv6Interface


def parse_ip(text: str) -> Address:
    """An IP as kube's ``ip()`` takes it: no zone, no IPv4-mapped IPv6 address."""
    if "%" in text:
        raise ValueError(f'IP address "{text}" with zone value is not allowed')
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        raise ValueError(
            f'IP Address "{text}" parse error during conversion from string: '
            f'ParseAddr("{text}"): unable to parse IP'
        ) from None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        raise ValueError(f'IPv4-mapped IPv6 address "{text}" is not allowed')
    return address


def parse_cidr(text: str) -> Network:
    """A CIDR as kube's ``cidr()`` takes it (the address part is kept as written)."""
    address, slash, bits = text.partition("/")
    problem = "" if slash else "no '/'"
    if not problem and (not bits.isdigit() or (len(bits) > 1 and bits[0] == "0")):
        problem = f'bad bits after slash: "{bits}"'
    if not problem:
        try:
            network = ipaddress.ip_interface(text)
        except ValueError:
            problem = "ParseAddr: unable to parse IP"
        else:
            if "%" in address or network.network.prefixlen != int(bits):
                problem = "invalid prefix"
    if problem:
        raise ValueError(
            "network address parse error during conversion from string: "
            f'netip.ParsePrefix("{text}"): {problem}'
        )
    if isinstance(network.ip, ipaddress.IPv6Address) and network.ip.ipv4_mapped is not None:
        raise ValueError(f'IPv4-mapped IPv6 address "{text}" is not allowed')
    return network


def _ip_value(text: str) -> dict[bool, str]:
    return {_IP_KEY: str(parse_ip(text))}


def _cidr_value(text: str) -> dict[bool, str]:
    network = parse_cidr(text)
    return {_CIDR_KEY: f"{network.ip}/{network.network.prefixlen}"}


def _ip_of(value: Any) -> Address:
    if _IP_KEY not in value:
        raise ValueError("no such overload")
    return ipaddress.ip_address(value[_IP_KEY])


def _cidr_of(value: Any) -> Network:
    if _CIDR_KEY not in value:
        raise ValueError("no such overload")
    return ipaddress.ip_interface(value[_CIDR_KEY])


def _valid(parse: Any) -> Any:
    def check(text: str) -> bool:
        try:
            parse(text)
        except ValueError:
            return False
        return True

    return check


def _is_canonical(text: str) -> bool:
    return str(parse_ip(text)) == text


def _is_global_unicast(address: Address) -> bool:
    """Go's ``netip.Addr.IsGlobalUnicast``: private ranges are global unicast there."""
    if isinstance(address, ipaddress.IPv4Address) and str(address) in (
        "0.0.0.0",
        "255.255.255.255",
    ):
        return False
    return not (
        address.is_unspecified
        or address.is_loopback
        or address.is_multicast
        or _link_local_unicast(address)
    )


def _link_local_unicast(address: Address) -> bool:
    if isinstance(address, ipaddress.IPv4Address):
        return address in ipaddress.ip_network("169.254.0.0/16")
    return address in ipaddress.ip_network("fe80::/10")


def _link_local_multicast(address: Address) -> bool:
    if isinstance(address, ipaddress.IPv4Address):
        return address in ipaddress.ip_network("224.0.0.0/24")
    return address in ipaddress.ip_network("ff02::/16")


def _string(value: Any) -> str:
    return str(value[_IP_KEY] if _IP_KEY in value else value[_CIDR_KEY])


def _contains_ip(cidr: Any, other: Any) -> bool:
    address = parse_ip(other) if isinstance(other, str) else _ip_of(other)
    network = _cidr_of(cidr).network
    return address.version == network.version and address in network


def _contains_cidr(cidr: Any, other: Any) -> bool:
    inner = parse_cidr(other) if isinstance(other, str) else _cidr_of(other)
    outer = _cidr_of(cidr).network
    return (
        inner.version == outer.version
        and inner.network.prefixlen >= outer.prefixlen
        and inner.ip in outer
    )


def _masked(cidr: Any) -> dict[bool, str]:
    network = _cidr_of(cidr).network
    return {_CIDR_KEY: str(network)}


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def parse_url(text: str) -> str:
    """The URL if Go's ``url.ParseRequestURI`` takes it: absolute, or an absolute path."""
    if not (_SCHEME.match(text) or text.startswith("/")) or any(c in text for c in " \x7f"):
        raise ValueError(
            "URL parse error during conversion from string: "
            f'parse "{text}": invalid URI for request'
        )
    return text


def _url(value: Any) -> Any:
    return urlsplit(str(value[0]))


def _host(value: Any) -> str:
    return str(_url(value).netloc.rpartition("@")[2])


def _hostname(value: Any) -> str:
    host = _host(value)
    if host.startswith("["):
        return host[1 : host.find("]")]
    return host.partition(":")[0]


def _port(value: Any) -> str:
    host = _host(value)
    after = host[host.find("]") + 1 :] if host.startswith("[") else host
    return after.partition(":")[2]


def _query(value: Any) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for key, item in parse_qsl(_url(value).query, keep_blank_values=True):
        found.setdefault(key, []).append(item)
    return found


def _fn(name: str, overloads: list[Any]) -> Any:
    return cel.FunctionDecl(name, overloads)


def _one(name: str, result: Any, params: list[Any], impl: Any, member: bool = True) -> Any:
    ident = f"net_{name.replace('.', '_')}"
    return _fn(name, [cel.Overload(ident, result, params, is_member=member, impl=impl)])


def network_library() -> Any:
    """ip, isIP, ip.isCanonical, cidr, isCIDR, their members and string(); url, isURL and
    the URL getters."""
    b, i, s = _T.BOOL, _T.INT, _T.STRING
    ip_bool = {
        "isUnspecified": lambda a: _ip_of(a).is_unspecified,
        "isLoopback": lambda a: _ip_of(a).is_loopback,
        "isLinkLocalMulticast": lambda a: _link_local_multicast(_ip_of(a)),
        "isLinkLocalUnicast": lambda a: _link_local_unicast(_ip_of(a)),
        "isGlobalUnicast": lambda a: _is_global_unicast(_ip_of(a)),
    }
    decls = [
        _fn(
            "ip",
            [
                cel.Overload("string_to_ip", NET, [s], impl=_ip_value),
                cel.Overload(
                    "cidr_ip",
                    NET,
                    [NET],
                    is_member=True,
                    impl=lambda c: {_IP_KEY: str(_cidr_of(c).ip)},
                ),
            ],
        ),
        _one("isIP", b, [s], _valid(parse_ip), member=False),
        _one("ip.isCanonical", b, [s], _is_canonical, member=False),
        _one("family", i, [NET], lambda a: _ip_of(a).version),
        *(_one(name, b, [NET], impl) for name, impl in ip_bool.items()),
        _one("cidr", NET, [s], _cidr_value, member=False),
        _one("isCIDR", b, [s], _valid(parse_cidr), member=False),
        _fn(
            "containsIP",
            [
                cel.Overload(
                    "cidr_contains_ip_string", b, [NET, s], is_member=True, impl=_contains_ip
                ),
                cel.Overload(
                    "cidr_contains_ip_ip", b, [NET, NET], is_member=True, impl=_contains_ip
                ),
            ],
        ),
        _fn(
            "containsCIDR",
            [
                cel.Overload(
                    "cidr_contains_cidr_string", b, [NET, s], is_member=True, impl=_contains_cidr
                ),
                cel.Overload(
                    "cidr_contains_cidr", b, [NET, NET], is_member=True, impl=_contains_cidr
                ),
            ],
        ),
        _one("masked", NET, [NET], _masked),
        _one("prefixLength", i, [NET], lambda c: _cidr_of(c).network.prefixlen),
        _one("string", s, [NET], _string, member=False),
        _one("url", URL, [s], lambda t: {0: parse_url(t)}, member=False),
        _one("isURL", b, [s], _valid(parse_url), member=False),
        _one("getScheme", s, [URL], lambda u: _url(u).scheme),
        _one("getHost", s, [URL], _host),
        _one("getHostname", s, [URL], _hostname),
        _one("getPort", s, [URL], _port),
        _one("getEscapedPath", s, [URL], lambda u: _url(u).path),
        _one("getQuery", _T.Map(s, _T.List(s)), [URL], _query),
    ]
    return cel.CelExtension("kubernetes.network", decls)
