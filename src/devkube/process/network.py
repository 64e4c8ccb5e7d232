"""A network namespace per pod on the process runtime: its own loopback and ports, an address
on a bridge only this dev cluster uses.

Layout (docs/design.md, "Process runtime network"): one bridge per dev cluster holding the
gateway address (the host's side: the API server also listens there), one veth pair per pod
(host end on the bridge, `eth0` in the pod's named network namespace). Pod addresses come from
198.18.0.0/15, the benchmarking range (RFC 2544) that nothing routes: nothing is NATed or
forwarded, no default route is set in a pod, so pod traffic stays on this machine; pods reach
each other, the host and the API server and nothing else.

Every name starts with `devk` followed by the owning process id in hex, so a run that crashed
is recognised by a dead owner and swept at the next start. Where the machine does not allow
it (not root, no `ip`, no veth or bridge support), `plan()` says why and the runtime falls back
to the shared loopback network.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import ipaddress
import itertools
import logging
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

PREFIX = "devk"
# Benchmarking addresses (RFC 2544): reserved, routed nowhere. Cut into /18s (the gateway's /24
# and 63 node /24s each), so that eight dev clusters of the process runtime run side by side on
# one machine (parallel test workers, several checkouts).
SUBNETS = tuple(str(net) for net in ipaddress.IPv4Network("198.18.0.0/15").subnets(new_prefix=18))
#: Held while a cluster picks a free range and puts its bridge address up, so that two dev
#: clusters starting at once (test workers) never take the same range.
LOCK = "/run/devkube-network.lock"
_NAME = re.compile(rf"^{PREFIX}([0-9a-f]{{6}})")
# Tells apart the clusters one process makes one after the other (tests do).
_SEQUENCE = itertools.count()


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20, check=check)


def _owner_alive(tag: str) -> bool:
    return os.path.exists(f"/proc/{int(tag, 16)}")


def _links() -> list[str]:
    out = _ip("-o", "link", "show", check=False).stdout
    names = []
    for line in out.splitlines():
        parts = line.split(":", 2)
        if len(parts) > 1:
            names.append(parts[1].strip().split("@")[0])
    return names


def _netns() -> list[str]:
    out = _ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _subnets_in_use() -> set[str]:
    """Networks of addresses on this machine's interfaces (ours or anybody's)."""
    out = _ip("-o", "-4", "addr", "show", check=False).stdout
    found = set()
    for match in re.finditer(r"inet (\S+)", out):
        found.add(str(ipaddress.ip_interface(match.group(1)).network))
    return found


def sweep_stale() -> list[str]:
    """Remove the bridges, veths and namespaces of dev clusters whose process is gone."""
    removed = []
    for name in _netns():
        match = _NAME.match(name)
        if match and not _owner_alive(match.group(1)):
            _ip("netns", "delete", name, check=False)
            removed.append(name)
    for name in _links():
        match = _NAME.match(name)
        if match and not _owner_alive(match.group(1)):
            _ip("link", "delete", name, check=False)
            removed.append(name)
    return removed


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    """An exclusive flock on ``path`` (no lock where the file cannot be made)."""
    try:
        handle = open(path, "a")  # noqa: SIM115 (held for the block)
    except OSError:
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@functools.cache
def netns_available() -> tuple[bool, str]:
    """Whether pods can get their own network namespace here, and why not when not."""
    if os.geteuid() != 0:
        return False, "creating network namespaces needs root"
    if shutil.which("ip") is None:
        return False, "the `ip` tool (iproute2) is missing"
    probe = f"{PREFIX}{os.getpid():06x}t"
    made = _ip("link", "add", probe, "type", "veth", "peer", "name", probe + "p", check=False)
    if made.returncode != 0:
        return False, f"this machine refuses veth pairs: {made.stderr.strip()}"
    _ip("link", "delete", probe, check=False)
    return True, "network namespaces, veth pairs and bridges are available"


@dataclass
class ClusterNetwork:
    """One dev cluster's bridge and its pods' namespaces."""

    subnet: ipaddress.IPv4Network
    tag: str = field(default_factory=lambda: f"{os.getpid():06x}{next(_SEQUENCE) % 16:x}")
    _count: int = 0
    _pods: dict[str, str] = field(default_factory=dict)
    up: bool = False

    @classmethod
    def claim(cls) -> tuple[ClusterNetwork | None, str]:
        """`plan` and `setup` under a machine-wide lock: a network that is up, or None and
        why. Raises like `setup` when the machine refuses the bridge."""
        with _locked(LOCK):
            network, why = cls.plan()
            if network is not None:
                network.setup()
            return network, why

    @classmethod
    def plan(cls) -> tuple[ClusterNetwork | None, str]:
        """A network to set up, or None and the reason pods share the host's network."""
        ok, why = netns_available()
        if not ok:
            return None, why
        sweep_stale()
        # Overlap, not equality: a range inside (or around) another's, such as a /16 another
        # dev cluster's older code took, would route part of either cluster's pods to the other.
        taken = [ipaddress.IPv4Network(net) for net in _subnets_in_use()]
        for subnet in map(ipaddress.IPv4Network, SUBNETS):
            if not any(subnet.overlaps(net) for net in taken):
                return cls(subnet), ""
        return (
            None,
            f"all {len(SUBNETS)} pod ranges of 198.18.0.0/15 are in use by other dev clusters",
        )

    @property
    def bridge(self) -> str:
        return f"{PREFIX}{self.tag}b"

    @property
    def gateway(self) -> str:
        """The host's address on the bridge: what pods reach the API server and the host at."""
        return str(self.subnet.network_address + 1)

    def node_cidr(self, index: int) -> str:
        base = self.subnet.network_address + (index + 1) * 256
        return f"{base}/24"

    def nodes(self, nodes: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Each node a /24 of the pod range and the gateway as its address (a pod's hostIP)."""
        out = []
        nodes = list(nodes)
        room = self.subnet.num_addresses // 256 - 1  # the first /24 is the gateway's
        if len(nodes) > room:
            raise ValueError(f"{len(nodes)} nodes: the process runtime's pod range holds {room}")
        for index, node in enumerate(nodes):
            copy = {**node, "spec": {**(node.get("spec") or {}), "podCIDR": self.node_cidr(index)}}
            status = dict(node.get("status") or {})
            status["addresses"] = [
                {**a, "address": self.gateway} if a.get("type") == "InternalIP" else a
                for a in status.get("addresses") or []
            ]
            copy["status"] = status
            out.append(copy)
        return out

    def setup(self) -> None:
        """Create the bridge with the gateway address; raises when the machine refuses."""
        _ip("link", "add", self.bridge, "type", "bridge")
        try:
            _ip("addr", "add", f"{self.gateway}/{self.subnet.prefixlen}", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
        except subprocess.CalledProcessError:
            _ip("link", "delete", self.bridge, check=False)
            raise
        self.up = True

    def add_pod(self, pod_ip: str) -> str:
        """A named namespace with loopback and `eth0` at `pod_ip` on the bridge; its name."""
        self._count += 1
        name = f"{PREFIX}{self.tag}-{self._count}"
        host_end = f"{PREFIX}{self.tag}v{self._count:x}"  # at most 15 characters
        prefix = self.subnet.prefixlen
        _ip("netns", "add", name)
        try:
            _ip("link", "add", host_end, "type", "veth", "peer", "name", "eth0", "netns", name)
            _ip("link", "set", host_end, "master", self.bridge, "up")
            _ip("-n", name, "addr", "add", f"{pod_ip}/{prefix}", "dev", "eth0")
            _ip("-n", name, "link", "set", "lo", "up")
            _ip("-n", name, "link", "set", "eth0", "up")
        except subprocess.CalledProcessError:
            self.remove_pod(name)
            raise
        self._pods[name] = host_end
        return name

    def remove_pod(self, name: str) -> None:
        host_end = self._pods.pop(name, None)
        if host_end is not None:
            _ip("link", "delete", host_end, check=False)
        _ip("netns", "delete", name, check=False)

    def teardown(self) -> None:
        """Remove everything this cluster created."""
        for name in list(self._pods):
            self.remove_pod(name)
        for name in _netns():
            if name.startswith(f"{PREFIX}{self.tag}-"):
                _ip("netns", "delete", name, check=False)
        if self.up:
            with contextlib.suppress(subprocess.SubprocessError):
                _ip("link", "delete", self.bridge, check=False)
            self.up = False

    def netns_path(self, name: str) -> str:
        return f"/run/netns/{name}"
