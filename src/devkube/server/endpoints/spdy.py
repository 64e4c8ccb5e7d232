"""The slice of SPDY/3.1 framing that `kubectl port-forward` needs from a server.

kubectl 1.31+ forwards ports by tunnelling a SPDY/3.1 session through a WebSocket
(subprotocol `SPDY/3.1+portforward.k8s.io`); its SPDY client opens the streams and the server
only answers them, so this knows how to read every frame a client sends and how to write the
four a server answers with (SYN_REPLY, DATA, RST_STREAM, PING). Flow control frames are read and
ignored: kubectl's SPDY library does not do flow control either.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

VERSION = 3
SYN_STREAM = 1
SYN_REPLY = 2
RST_STREAM = 3
SETTINGS = 4
PING = 6
GOAWAY = 7
HEADERS = 8
WINDOW_UPDATE = 9
FLAG_FIN = 0x01
RST_CANCEL = 5
MAX_DATA = (1 << 24) - 1

# SPDY/3 (draft 3, "Compression") primes header compression with this dictionary: common
# header names, each with a 32-bit big-endian length prefix, then a run of common values.
_WORDS = (
    "options",
    "head",
    "post",
    "put",
    "delete",
    "trace",
    "accept",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "accept-ranges",
    "age",
    "allow",
    "authorization",
    "cache-control",
    "connection",
    "content-base",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-md5",
    "content-range",
    "content-type",
    "date",
    "etag",
    "expect",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "location",
    "max-forwards",
    "pragma",
    "proxy-authenticate",
    "proxy-authorization",
    "range",
    "referer",
    "retry-after",
    "server",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "vary",
    "via",
    "warning",
    "www-authenticate",
    "method",
    "get",
    "status",
)
_WORDS_AFTER_STATUS = ("200 OK", "version", "HTTP/1.1", "url", "public", "set-cookie")
_WORDS_LAST = ("keep-alive", "origin")
_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504"
    "505203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request"
    "401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented"
    "503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, "
    "Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,"
    "application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age="
    "gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)


def _dictionary() -> bytes:
    words = (*_WORDS, *_WORDS_AFTER_STATUS, *_WORDS_LAST)
    return b"".join(struct.pack(">I", len(w)) + w.encode() for w in words) + _TAIL.encode()


DICTIONARY = _dictionary()


class ProtocolError(Exception):
    """The peer sent something that is not SPDY/3.1."""


@dataclass(frozen=True)
class Frame:
    """One frame as read: `kind` is 0 for DATA, else the control frame type."""

    kind: int
    flags: int
    stream_id: int = 0
    data: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    status: int = 0

    @property
    def fin(self) -> bool:
        return bool(self.flags & FLAG_FIN)


class Codec:
    """One connection's framing state: the two zlib contexts header blocks share across
    frames, and the bytes of a frame not yet complete."""

    def __init__(self) -> None:
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)
        self._deflate = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zdict=DICTIONARY)
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Frame]:
        """Take bytes from the wire; the frames they complete."""
        self._buffer += data
        frames = []
        while len(self._buffer) >= 8:
            length = int.from_bytes(self._buffer[5:8], "big")
            if len(self._buffer) < 8 + length:
                break
            head = bytes(self._buffer[:8])
            body = bytes(self._buffer[8 : 8 + length])
            del self._buffer[: 8 + length]
            frames.append(self._frame(head, body))
        return frames

    def _frame(self, head: bytes, body: bytes) -> Frame:
        first, flags = struct.unpack(">I", head[:4])[0], head[4]
        if not first & 0x80000000:
            return Frame(0, flags, first & 0x7FFFFFFF, body)
        version, kind = (first >> 16) & 0x7FFF, first & 0xFFFF
        if version != VERSION:
            raise ProtocolError(f"SPDY version {version} is not supported (only 3.1)")
        if kind == SYN_STREAM:
            if len(body) < 10:
                raise ProtocolError("short SYN_STREAM")
            stream_id = struct.unpack(">I", body[:4])[0] & 0x7FFFFFFF
            return Frame(kind, flags, stream_id, headers=self._headers(body[10:]))
        if kind in (SYN_REPLY, HEADERS):
            stream_id = struct.unpack(">I", body[:4])[0] & 0x7FFFFFFF
            return Frame(kind, flags, stream_id, headers=self._headers(body[4:]))
        if kind == RST_STREAM:
            stream_id, status = struct.unpack(">II", body[:8])
            return Frame(kind, flags, stream_id & 0x7FFFFFFF, status=status)
        if kind == PING:
            return Frame(kind, flags, data=body[:4])
        return Frame(kind, flags, data=body)

    def _headers(self, block: bytes) -> dict[str, str]:
        raw = self._inflate.decompress(block)
        count = struct.unpack(">I", raw[:4])[0]
        at, headers = 4, {}
        for _ in range(count):
            (n,) = struct.unpack(">I", raw[at : at + 4])
            name = raw[at + 4 : at + 4 + n].decode()
            at += 4 + n
            (v,) = struct.unpack(">I", raw[at : at + 4])
            headers[name.lower()] = raw[at + 4 : at + 4 + v].decode()
            at += 4 + v
        return headers

    def syn_reply(self, stream_id: int, headers: dict[str, str] | None = None) -> bytes:
        pairs = headers or {}
        raw = struct.pack(">I", len(pairs)) + b"".join(
            struct.pack(">I", len(k)) + k.encode() + struct.pack(">I", len(v)) + v.encode()
            for k, v in pairs.items()
        )
        block = self._deflate.compress(raw) + self._deflate.flush(zlib.Z_SYNC_FLUSH)
        return _control(SYN_REPLY, 0, struct.pack(">I", stream_id) + block)


def _control(kind: int, flags: int, body: bytes) -> bytes:
    return struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(body)) + body


def data(stream_id: int, payload: bytes, *, fin: bool = False) -> bytes:
    flags = FLAG_FIN if fin else 0
    return struct.pack(">II", stream_id, (flags << 24) | len(payload)) + payload


def rst_stream(stream_id: int, status: int = RST_CANCEL) -> bytes:
    return _control(RST_STREAM, 0, struct.pack(">II", stream_id, status))


def ping(payload: bytes) -> bytes:
    return _control(PING, 0, payload)
