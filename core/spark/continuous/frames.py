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

Before the peer proved the key it gets a small fixed budget: HANDSHAKE_BYTES within
HANDSHAKE_SECONDS. After it, a frame's length is bounded by FRAME_BYTES, so at most one frame
waits for its tag unchecked.

With a TLS context, the connection first sets up TLS (Python's ssl over memory buffers, the
socket staying a plain one) and all of the above runs inside it. The frames' keys are then bound
to the TLS session: their derivation also takes the SHA-256 digest of the server's certificate as
this session presented it (the accepting end's own, the one the connecting end received), so a
relay that terminates TLS with another certificate, even one the connecting end trusts, makes
the key proof fail before a byte of data is sent. When the connecting end's context checks names
(TlsContext), a verified server certificate that names hosts must name the one it connected to.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import ipaddress
import secrets
import socket
import ssl
import struct
import threading
import time
from collections.abc import Iterable
from typing import Any

MAGIC = b"jetspk01"
NONCE_BYTES = 32
TAG_BYTES = hashlib.sha256().digest_size
FRAME_BYTES = 1 << 20
"""The longest body of one frame: longer writes go as several frames."""
HANDSHAKE_SECONDS = 15.0
"""How long a peer that has not proven the key may take to do so."""
HANDSHAKE_BYTES = 64 << 10
"""How much a peer that has not proven the key may send (TLS's handshake included)."""
CONTROL = "control"
"""The purpose of the control connections (a member stream's is the job's epoch)."""
DRIVER = -1
"""The identity of the driver's coordinator in a greeting (members say their index)."""

_GREETING = struct.Struct(f"<{len(MAGIC)}s{NONCE_BYTES}si")
_HEAD = struct.Struct(f"<I{TAG_BYTES}s")
_SEQUENCE = struct.Struct("<QI")
_LABEL = b"jetspark frames v1"
_READ_BYTES = 1 << 18
_HANDSHAKE_READ = 1 << 12


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
    secret: bytes,
    purpose: str,
    initiator_greeting: bytes,
    acceptor_greeting: bytes,
    tls_binding: bytes = b"",
) -> tuple[bytes, bytes]:
    """(initiator -> acceptor key, acceptor -> initiator key): HKDF-SHA256 of the job's secret
    with the purpose, both greetings (their nonces) and `tls_binding` (over TLS, the SHA-256
    digest of the server's certificate in this session; empty without TLS) as info."""
    pseudo_random = hmac.digest(_LABEL, secret, "sha256")
    purpose_bytes = purpose.encode()
    info = (
        struct.pack("<I", len(purpose_bytes))
        + purpose_bytes
        + initiator_greeting
        + acceptor_greeting
        + tls_binding
    )
    first = hmac.digest(pseudo_random, info + b"\x01", "sha256")
    second = hmac.digest(pseudo_random, first + info + b"\x02", "sha256")
    return first, second


class TlsContext(ssl.SSLContext):
    """An SSLContext as a handshake needs it: an accepting end's knows the certificate it
    presents (`presented`, DER), which the frames' keys are bound to; a connecting end's with
    `checks_names` refuses a server certificate that names hosts (subjectAltName DNS or IP)
    but not the one it connected to (one naming no host is trusted on its verification alone)."""

    presented: bytes = b""
    checks_names: bool = False


def check_names(certificate: dict[str, Any], hosts: Iterable[str]) -> bool:
    """True when `certificate` (as SSLObject.getpeercert gives it) names no host, or names one
    of `hosts` (an IP address by an IP name, a name by a DNS name or a one-label wildcard)."""
    names = certificate.get("subjectAltName", ())
    dns_names = [value.lower().rstrip(".") for kind, value in names if kind == "DNS"]
    addresses = {ipaddress.ip_address(value) for kind, value in names if kind == "IP Address"}
    if not dns_names and not addresses:
        return True
    for host in hosts:
        try:
            if ipaddress.ip_address(host) in addresses:
                return True
        except ValueError:
            name = host.lower().rstrip(".")
            label, _, parent = name.partition(".")
            if any(
                pattern == name or (pattern.startswith("*.") and label and pattern[2:] == parent)
                for pattern in dns_names
            ):
                return True
    return False


class _Tls:
    """TLS over memory buffers: the socket stays a plain one (so closing it from another
    thread interrupts whatever waits on it, and non-blocking reads need no TLS states), and
    both directions may be used from different threads."""

    def __init__(self, tls: ssl.SSLObject, incoming: ssl.MemoryBIO, outgoing: ssl.MemoryBIO):
        self._tls = tls
        self._incoming = incoming
        self._outgoing = outgoing
        self._lock = threading.Lock()

    def encrypt(self, plain: bytes | bytearray, out: bytearray) -> None:
        """Appends the TLS records of `plain` (and anything else TLS has to send) to `out`."""
        with self._lock:
            if plain:
                self._tls.write(plain)
            out += self._outgoing.read()

    def decrypt(self, data: bytes | bytearray | memoryview, out: bytearray, peer: str) -> None:
        """Appends to `out` what the TLS records of `data` complete."""
        with self._lock:
            self._incoming.write(data)
            while True:
                try:
                    chunk = self._tls.read(_READ_BYTES)
                except ssl.SSLWantReadError:
                    return
                except ssl.SSLZeroReturnError:
                    return  # the peer ended TLS: the connection's end says the rest
                except ssl.SSLError as error:
                    raise ForgedFrameError(f"TLS from {peer} failed: {error}") from None
                if not chunk:
                    return
                out += chunk


class Frames:
    """Both directions of one connection after its handshake: `seal` what goes out, `open`
    what comes in (the caller serializes each direction)."""

    def __init__(
        self, sealer: Sealer, opener: Opener, peer_identity: int, tls: _Tls | None, early: bytes
    ) -> None:
        self.sealer = sealer
        self.opener = opener
        self._tls = tls
        self.peer_identity = peer_identity
        """What the peer said it is (a member index; -1 for the driver), proven with the key."""
        self.early = early
        """Authenticated bytes that arrived with the handshake: the first the reader takes."""

    @property
    def peer(self) -> str:
        """The peer's address, for messages."""
        return self.opener.peer

    @property
    def encrypted(self) -> bool:
        """True when the connection runs over TLS."""
        return self._tls is not None

    def seal(self, data: bytes | bytearray | memoryview, out: bytearray) -> None:
        """Appends to `out` the bytes that carry `data` to the peer."""
        if self._tls is None:
            self.sealer.seal(data, out)
            return
        frames = bytearray()
        self.sealer.seal(data, frames)
        self._tls.encrypt(frames, out)

    def open(self, data: bytes | bytearray | memoryview, out: bytearray) -> None:
        """Appends to `out` the authenticated bytes `data` completes (ForgedFrameError when a
        frame fails: the connection is then unusable)."""
        if self._tls is not None:
            plain = bytearray()
            self._tls.decrypt(data, plain, self.peer)
            data = plain
        self.opener.feed(data, out)


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
    tls: TlsContext | None = None,
    server_hostname: str | None = None,
) -> Frames:
    """Greets the peer on `connection` (blocking) and proves the key both ways within
    `seconds` and HANDSHAKE_BYTES read, first setting up TLS with `tls` when given (the
    connecting end reaching `server_hostname`, else the address it is connected to); the
    connection's Frames. HandshakeError when the peer closes, stays silent, fails TLS or sends
    anything else; ForgedFrameError when it does not hold the key for this TLS session."""
    stranger = _Stranger(connection, time.monotonic() + seconds)
    if tls is not None:
        stranger.start_tls(tls, server_side=not initiator, server_hostname=server_hostname)
    own = _GREETING.pack(MAGIC, secrets.token_bytes(NONCE_BYTES), identity)
    stranger.send(own)
    theirs = stranger.take(_GREETING.size)
    magic, _, peer_identity = _GREETING.unpack(theirs)
    if magic != MAGIC:
        raise HandshakeError(f"{stranger.peer} does not speak jetspark's protocol")
    if initiator:
        send_key, receive_key = derive_keys(secret, purpose, own, theirs, stranger.binding)
    else:
        receive_key, send_key = derive_keys(secret, purpose, theirs, own, stranger.binding)
    sealer, opener = Sealer(send_key), Opener(receive_key, stranger.peer)
    proof = bytearray()
    sealer.seal(b"", proof)
    stranger.send(proof)
    if opener.feed(stranger.take(_HEAD.size), bytearray()) != 1:
        raise HandshakeError(f"{stranger.peer} does not speak jetspark's protocol")
    early = bytearray()
    opener.feed(stranger.rest(), early)
    connection.settimeout(None)
    return Frames(sealer, opener, peer_identity, stranger.tls, bytes(early))


class _Stranger:
    """A peer that has not proven the key yet: every read is bounded by the handshake's
    deadline and, all together, by HANDSHAKE_BYTES."""

    def __init__(self, connection: socket.socket, deadline: float) -> None:
        self._connection = connection
        self._deadline = deadline
        self._budget = HANDSHAKE_BYTES
        self._plain = bytearray()
        self.tls: _Tls | None = None
        self.binding = b""
        """The SHA-256 digest of the server's certificate in this TLS session (empty without)."""
        self.peer = address_of(connection)

    def start_tls(
        self, context: TlsContext, server_side: bool, server_hostname: str | None
    ) -> None:
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = context.wrap_bio(
            incoming,
            outgoing,
            server_side=server_side,
            server_hostname=None if server_side else server_hostname,
        )
        while True:
            try:
                tls.do_handshake()
                done = True
            except ssl.SSLWantReadError:
                done = False
            except ssl.SSLError as error:
                with contextlib.suppress(OSError):  # the alert saying why, if any
                    self._connection.sendall(outgoing.read())
                raise HandshakeError(f"TLS with {self.peer} failed: {error}") from None
            if outgoing.pending:
                self._connection.sendall(outgoing.read())
            if done:
                break
            incoming.write(self._receive())
        if server_side:
            certificate = context.presented
        else:
            certificate = tls.getpeercert(binary_form=True) or b""
            self._check_names(context, tls, server_hostname)
        self.binding = hashlib.sha256(certificate).digest()
        self.tls = _Tls(tls, incoming, outgoing)
        self._plain = bytearray()
        self.tls.decrypt(b"", self._plain, self.peer)  # what came with the last handshake bytes

    def _check_names(
        self, context: TlsContext, tls: ssl.SSLObject, server_hostname: str | None
    ) -> None:
        """HandshakeError when `context` checks names and the server's certificate names hosts
        but neither `server_hostname` nor the address connected to."""
        if not context.checks_names:
            return
        hosts = [self._connection.getpeername()[0]]
        if server_hostname is not None:
            hosts.append(server_hostname)
        if not check_names(tls.getpeercert() or {}, hosts):
            raise HandshakeError(
                f"TLS with {self.peer} failed: its certificate names other hosts than "
                f"{' or '.join(hosts)}"
            )

    def send(self, data: bytes | bytearray) -> None:
        if self.tls is None:
            self._connection.sendall(data)
            return
        wire = bytearray()
        self.tls.encrypt(data, wire)
        self._connection.sendall(wire)

    def take(self, size: int) -> bytes:
        """The next `size` bytes from the peer (decrypted)."""
        while len(self._plain) < size:
            data = self._receive()
            if self.tls is None:
                self._plain += data
            else:
                self.tls.decrypt(data, self._plain, self.peer)
        taken = bytes(self._plain[:size])
        del self._plain[:size]
        return taken

    def rest(self) -> bytes:
        """What arrived beyond what was taken."""
        return bytes(self._plain)

    def _receive(self) -> bytes:
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise HandshakeError(f"{self.peer} did not prove the key in time")
        if self._budget <= 0:
            raise HandshakeError(
                f"{self.peer} sent {HANDSHAKE_BYTES} bytes without proving the key"
            )
        self._connection.settimeout(remaining)
        try:
            chunk = self._connection.recv(min(self._budget, _HANDSHAKE_READ))
        except TimeoutError:
            raise HandshakeError(f"{self.peer} did not prove the key in time") from None
        if not chunk:
            raise HandshakeError(f"{self.peer} closed the connection before proving the key")
        self._budget -= len(chunk)
        return chunk
