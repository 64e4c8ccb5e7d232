"""Loopback pod addresses: every pod gets its own 127.x address, so servers in different pods
can bind the same port, as they would with one network namespace per pod."""

from __future__ import annotations


class AddressPool:
    """Hands out 127.1.0.1 .. 127.1.255.254 round-robin (a freed address is reused last, so a
    client still talking to a dead pod does not reach its successor)."""

    def __init__(self, second_octet: int = 1) -> None:
        self._prefix = f"127.{second_octet}"
        self._next = 0
        self._size = 256 * 254
        self._taken: dict[str, str] = {}

    def _address(self, n: int) -> str:
        return f"{self._prefix}.{n // 254}.{n % 254 + 1}"

    def allocate(self, key: str) -> str:
        if key in self._taken:
            return self._taken[key]
        used = set(self._taken.values())
        for _ in range(self._size):
            ip = self._address(self._next)
            self._next = (self._next + 1) % self._size
            if ip not in used:
                self._taken[key] = ip
                return ip
        raise RuntimeError("no free pod address left in 127.1.0.0/16")

    def release(self, key: str) -> None:
        self._taken.pop(key, None)

    def get(self, key: str) -> str | None:
        return self._taken.get(key)
