"""Where Go's ``base64.StdEncoding`` stops decoding a JSON string bound for a ``[]byte`` field
(a Secret's ``data``, a ConfigMap's ``binaryData``): kube-apiserver's decoder fails the request
with ``illegal base64 data at input byte N``, N counted as Go's ``decodeQuantum`` counts it
(line breaks skipped, padding only at the end of a quantum).
"""

from __future__ import annotations

import functools

_ALPHABET = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
_BREAKS = (ord("\n"), ord("\r"))
_PAD = ord("=")


def _skip_breaks(src: bytes, si: int) -> int:
    while si < len(src) and src[si] in _BREAKS:
        si += 1
    return si


def _quantum(src: bytes, si: int) -> tuple[int, int | None, bool]:
    """One 4-character quantum from ``si``: (next index, failing byte or None, last)."""
    j = 0
    while j < 4:
        if si == len(src):
            return (si, None, True) if j == 0 else (si, si - j, True)
        c = src[si]
        si += 1
        if c in _ALPHABET:
            j += 1
            continue
        if c in _BREAKS:
            continue
        if c != _PAD or j < 2:
            return si, si - 1, True
        if j == 2:
            si = _skip_breaks(src, si)
            if si == len(src):
                return si, len(src), True
            if src[si] != _PAD:
                return si, si - 1, True
            si += 1
        si = _skip_breaks(src, si)
        return si, (si if si < len(src) else None), True
    return si, None, False


@functools.lru_cache(maxsize=1024)
def error(text: str) -> str | None:
    """Go's ``illegal base64 data at input byte N`` for ``text``, or None when it decodes."""
    src = text.encode()
    si = 0
    while True:
        si, bad, last = _quantum(src, si)
        if bad is not None:
            return f"illegal base64 data at input byte {bad}"
        if last:
            return None
