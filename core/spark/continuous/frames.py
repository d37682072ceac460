"""The authenticated framing under every connection of a continuous job: member streams
(streams.py) and control (control.py) alike.

A connection starts with a handshake: each end sends a greeting (a fixed magic, 32 fresh random
bytes and who it is), and both derive one key per direction from the job's secret and the two
greetings, HKDF with HMAC-SHA256 (RFC 5869) whose info also names the connection's purpose and,
on member streams, the job's attempt (epoch). Each end then proves the key with an empty frame.
After that, what either end writes travels in frames, each `<I` body length, an HMAC-SHA256 tag
and the body; the tag covers the direction's key, the frame's sequence number on the connection,
the length and the body. A frame is checked (in constant time) before a byte of its body is
handed on, so nothing unauthenticated is ever unpickled or decoded; a frame from another
connection, attempt or job, a reordered or replayed one, a tampered byte all fail the check.

Before the peer proved the key it gets a small fixed budget: the handshake reads exactly two
short messages within HANDSHAKE_SECONDS. After it, a frame's length is bounded by FRAME_BYTES,
so at most one frame waits for its tag unchecked.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import socket
import struct
import time

MAGIC = b"jetspk01"
NONCE_BYTES = 32
TAG_BYTES = hashlib.sha256().digest_size
FRAME_BYTES = 1 << 20
"""The longest body of one frame: longer writes go as several frames."""
HANDSHAKE_SECONDS = 15.0
"""How long a peer that has not proven the key may take to do so."""
CONTROL = "control"
"""The purpose of the control connections (a member stream's is the job's epoch)."""
DRIVER = -1
"""The identity of the driver's coordinator in a greeting (members say their index)."""

_GREETING = struct.Struct(f"<{len(MAGIC)}s{NONCE_BYTES}si")
_HEAD = struct.Struct(f"<I{TAG_BYTES}s")
_SEQUENCE = struct.Struct("<QI")
_LABEL = b"jetspark frames v1"


class ForgedFrameError(ConnectionError):
    """A frame, or a greeting, that was not written by an end holding the job's secret for
    this connection."""


class HandshakeError(ConnectionError):
    """A peer that closed, stayed silent or broke the protocol before proving the key."""


class Sealer:
    """The writing end of one direction: frames what it is given (the caller serializes
    calls, in the order the bytes go out)."""

    def __init__(self, key: bytes) -> None:
        self._mac = hmac.new(key, digestmod=hashlib.sha256)
        self._sequence = 0

    def seal(self, data: bytes | bytearray | memoryview, out: bytearray) -> None:
        """Appends `data` to `out` as frames of at most FRAME_BYTES (one empty frame for no
        data)."""
        with memoryview(data) as view:
            start = 0
            while True:
                with view[start : start + FRAME_BYTES] as body:
                    out += _HEAD.pack(len(body), self._tag(body))
                    out += body
                start += FRAME_BYTES
                if start >= len(view):
                    return

    def _tag(self, body: memoryview) -> bytes:
        mac = self._mac.copy()
        mac.update(_SEQUENCE.pack(self._sequence, len(body)))
        mac.update(body)
        self._sequence += 1
        return mac.digest()


class Opener:
    """The reading end of one direction: takes the bytes as they arrive and hands on the
    bodies of the frames that pass the check, in order."""

    def __init__(self, key: bytes, peer: str) -> None:
        self._mac = hmac.new(key, digestmod=hashlib.sha256)
        self._sequence = 0
        self._pending = bytearray()
        self.peer = peer

    def feed(self, data: bytes | bytearray | memoryview, out: bytearray) -> int:
        """Appends to `out` the bodies of the frames `data` completes; returns how many
        frames it checked. ForgedFrameError when one fails (the connection is then unusable)."""
        pending = self._pending
        pending += data
        position = frames = 0
        view = memoryview(pending)
        try:
            while len(pending) - position >= _HEAD.size:
                length, tag = _HEAD.unpack_from(pending, position)
                if length > FRAME_BYTES:
                    raise ForgedFrameError(
                        f"a frame from {self.peer} claims {length} bytes, more than any frame"
                    )
                end = position + _HEAD.size + length
                if end > len(pending):
                    break
                mac = self._mac.copy()
                mac.update(_SEQUENCE.pack(self._sequence, length))
                with view[position + _HEAD.size : end] as body:
                    mac.update(body)
                    if not hmac.compare_digest(mac.digest(), tag):
                        raise ForgedFrameError(f"a frame from {self.peer} failed authentication")
                    out += body
                self._sequence += 1
                position = end
                frames += 1
        finally:
            view.release()
        del pending[:position]
        return frames


def derive_keys(
    secret: bytes, purpose: str, initiator_greeting: bytes, acceptor_greeting: bytes
) -> tuple[bytes, bytes]:
    """(initiator -> acceptor key, acceptor -> initiator key): HKDF-SHA256 of the job's secret
    with the purpose and both greetings (their nonces) as info."""
    pseudo_random = hmac.digest(_LABEL, secret, "sha256")
    purpose_bytes = purpose.encode()
    info = (
        struct.pack("<I", len(purpose_bytes))
        + purpose_bytes
        + initiator_greeting
        + acceptor_greeting
    )
    first = hmac.digest(pseudo_random, info + b"\x01", "sha256")
    second = hmac.digest(pseudo_random, first + info + b"\x02", "sha256")
    return first, second


class Frames:
    """Both directions of one connection after its handshake."""

    def __init__(self, sealer: Sealer, opener: Opener, peer_identity: int) -> None:
        self.sealer = sealer
        self.opener = opener
        self.peer_identity = peer_identity
        """What the peer said it is (a member index; -1 for the driver), proven with the key."""

    @property
    def peer(self) -> str:
        """The peer's address, for messages."""
        return self.opener.peer


def address_of(connection: socket.socket) -> str:
    """`host:port` of the connection's peer (`?` once it is gone)."""
    try:
        address = connection.getpeername()
    except OSError:
        return "?"
    return f"{address[0]}:{address[1]}" if isinstance(address, tuple) else repr(address)


def handshake(
    connection: socket.socket,
    secret: bytes,
    purpose: str,
    identity: int,
    initiator: bool,
    seconds: float = HANDSHAKE_SECONDS,
) -> Frames:
    """Greets the peer on `connection` (blocking) and proves the key both ways within
    `seconds`; the connection's Frames. HandshakeError when the peer closes, stays silent or
    sends anything else; ForgedFrameError when it does not hold the key."""
    deadline = time.monotonic() + seconds
    peer = address_of(connection)
    own = _GREETING.pack(MAGIC, secrets.token_bytes(NONCE_BYTES), identity)
    connection.settimeout(seconds)
    connection.sendall(own)
    theirs = _receive_exactly(connection, _GREETING.size, deadline, peer)
    magic, _, peer_identity = _GREETING.unpack(theirs)
    if magic != MAGIC:
        raise HandshakeError(f"{peer} does not speak jetspark's protocol")
    if initiator:
        send_key, receive_key = derive_keys(secret, purpose, own, theirs)
    else:
        receive_key, send_key = derive_keys(secret, purpose, theirs, own)
    sealer, opener = Sealer(send_key), Opener(receive_key, peer)
    proof = bytearray()
    sealer.seal(b"", proof)
    connection.sendall(proof)
    rest = bytearray()
    if opener.feed(_receive_exactly(connection, _HEAD.size, deadline, peer), rest) != 1:
        raise HandshakeError(f"{peer} does not speak jetspark's protocol")
    connection.settimeout(None)
    return Frames(sealer, opener, peer_identity)


def _receive_exactly(connection: socket.socket, size: int, deadline: float, peer: str) -> bytes:
    received = bytearray()
    while len(received) < size:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise HandshakeError(f"{peer} did not prove the key in time")
        connection.settimeout(remaining)
        try:
            chunk = connection.recv(size - len(received))
        except TimeoutError:
            raise HandshakeError(f"{peer} did not prove the key in time") from None
        if not chunk:
            raise HandshakeError(f"{peer} closed the connection before proving the key")
        received += chunk
    return bytes(received)
