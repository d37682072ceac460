"""The authenticated framing of a continuous job's connections (core/spark/continuous/frames.py):
what one end seals, the other opens; a tampered byte, a reordered, dropped or replayed frame, a
frame of another connection, attempt or job, and a peer without the key are all refused before
any body is handed on. No Spark is needed."""

from __future__ import annotations

import contextlib
import socket
import ssl
import struct
import threading
from collections.abc import Callable

import pytest
from proven_sockets import SECRET, proven_pair

from jetspark.core.spark.continuous.control import ControlConnection
from jetspark.core.spark.continuous.frames import (
    FRAME_BYTES,
    MAGIC,
    ForgedFrameError,
    HandshakeError,
    Opener,
    Sealer,
    derive_keys,
    handshake,
)
from jetspark.core.spark.continuous.member import ControlState
from jetspark.core.spark.continuous.security import job_certificate

KEY = b"d" * 32
WAIT = 120.0
"""A bound on a wait that only a hang reaches."""


def _sealed(sealer: Sealer, *bodies: bytes) -> list[bytes]:
    """Each body sealed as the next frame of `sealer`."""
    sealed = []
    for body in bodies:
        out = bytearray()
        sealer.seal(body, out)
        sealed.append(bytes(out))
    return sealed


def _opened(opener: Opener, *wire: bytes) -> bytes:
    out = bytearray()
    for data in wire:
        opener.feed(data, out)
    return bytes(out)


def test_what_one_end_seals_the_other_opens_in_any_pieces() -> None:
    wire = b"".join(_sealed(Sealer(KEY), b"first", b"", b"x" * (FRAME_BYTES + 5)))
    pieces = [wire[i : i + 7001] for i in range(0, len(wire), 7001)]
    assert _opened(Opener(KEY, "peer"), *pieces) == b"first" + b"x" * (FRAME_BYTES + 5)


def test_a_tampered_byte_anywhere_in_a_frame_is_refused_and_nothing_of_it_handed_on() -> None:
    (frame,) = _sealed(Sealer(KEY), b"a pickled payload")
    for position in range(len(frame)):
        tampered = bytearray(frame)
        tampered[position] ^= 0x01
        out = bytearray()
        with pytest.raises(ForgedFrameError, match="from peer"):
            # a tampered length may claim more: what follows completes it
            Opener(KEY, "peer").feed(bytes(tampered) + b"\0" * 70_000, out)
        assert out == b""


@pytest.mark.parametrize(
    "order",
    [(1, 0), (0, 2), (0, 0), (0, 1, 1), (1,)],
    ids=["reordered", "one dropped", "replayed", "replayed later", "first missing"],
)
def test_reordered_dropped_and_replayed_frames_are_refused(order: tuple[int, ...]) -> None:
    frames = _sealed(Sealer(KEY), b"one", b"two", b"three")
    opener = Opener(KEY, "peer")
    with pytest.raises(ForgedFrameError):
        _opened(opener, *(frames[index] for index in order))


def test_a_length_beyond_any_frame_is_refused_before_its_body_is_read() -> None:
    header = struct.pack("<I", FRAME_BYTES + 1) + b"\0" * 32
    with pytest.raises(ForgedFrameError, match="more than any frame"):
        Opener(KEY, "peer").feed(header, bytearray())


def test_frames_of_another_connection_are_refused() -> None:
    (first, first_frames), (first_peer, _) = proven_pair()
    (second, _), (second_peer, second_frames) = proven_pair()
    for end in (first, first_peer, second, second_peer):
        end.close()
    (frame,) = _sealed(first_frames.sealer, b"captured")
    with pytest.raises(ForgedFrameError):
        _opened(second_frames.opener, frame)


@pytest.mark.parametrize(
    ("secret", "purpose"),
    [(SECRET, "stream r1a8"), (b"another job's secret".ljust(32), "stream r1a7")],
    ids=["another attempt", "another job"],
)
def test_the_same_greetings_under_another_attempt_or_job_give_other_keys(
    secret: bytes, purpose: str
) -> None:
    greetings = (MAGIC + b"\1" * 36, MAGIC + b"\2" * 36)
    ours = derive_keys(SECRET, "stream r1a7", *greetings)
    theirs = derive_keys(secret, purpose, *greetings)
    (frame,) = _sealed(Sealer(theirs[0]), b"captured")
    with pytest.raises(ForgedFrameError):
        _opened(Opener(ours[0], "peer"), frame)
    assert ours[0] != ours[1]  # each direction its own key: no reflection


def _against(
    peer: Callable[[socket.socket], None], tls: ssl.SSLContext | None = None
) -> BaseException:
    """What a handshake of the acceptor (over TLS with `tls`) raises against an initiator that
    does `peer`."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        initiator = socket.create_connection(server.getsockname())
        acceptor, _ = server.accept()
    thread = threading.Thread(target=peer, args=(initiator,))
    thread.start()
    try:
        with pytest.raises(ConnectionError) as refused:
            handshake(acceptor, SECRET, "control", -1, initiator=False, seconds=1.0, tls=tls)
        return refused.value
    finally:
        thread.join()
        initiator.close()
        acceptor.close()


def test_a_peer_without_the_key_is_refused_in_its_handshake() -> None:
    def wrong_key(connection: socket.socket) -> None:
        with pytest.raises(ConnectionError):
            handshake(connection, b"w" * 32, "control", 0, initiator=True, seconds=1.0)

    assert isinstance(_against(wrong_key), ForgedFrameError)


def test_a_peer_that_closes_sends_garbage_or_stays_silent_is_refused() -> None:
    def closes(connection: socket.socket) -> None:
        connection.shutdown(socket.SHUT_WR)

    def garbage(connection: socket.socket) -> None:
        with contextlib.suppress(OSError):  # refused before it wrote it all
            connection.sendall(b"GET / HTTP/1.1\r\n" * 1000)

    def silent(connection: socket.socket) -> None:
        connection.recv(1 << 16)  # reads the greeting, never answers

    assert "closed the connection" in str(_against(closes))
    assert "does not speak jetspark's protocol" in str(_against(garbage))
    refused = _against(silent)
    assert isinstance(refused, HandshakeError) and "did not prove the key" in str(refused)


# ------------------------------------------------------------------------------------- TLS

TLS = job_certificate()


def test_over_tls_what_one_end_seals_the_other_opens_and_the_wire_hides_it() -> None:
    (left, left_frames), (right, right_frames) = proven_pair(tls=TLS)
    try:
        assert left_frames.encrypted and right_frames.encrypted
        marker = b"MARKER-a1b2c3" * 1000
        wire = bytearray()
        left_frames.seal(marker, wire)
        assert b"MARKER-a1b2c3" not in wire
        left.sendall(wire)
        received = bytearray(right_frames.early)
        while len(received) < len(marker):
            right_frames.open(right.recv(1 << 16), received)
        assert received == marker
        back = bytearray()
        right_frames.seal(b"and back", back)
        right.sendall(back)
        opened = bytearray(left_frames.early)
        while not opened:
            left_frames.open(left.recv(1 << 16), opened)
        assert opened == b"and back"
    finally:
        left.close()
        right.close()


def test_a_tls_peer_with_another_certificate_or_without_tls_is_refused() -> None:
    def other_certificate(connection: socket.socket) -> None:
        with contextlib.suppress(ConnectionError):
            handshake(connection, SECRET, "control", 0, True, 1.0, job_certificate().context(False))

    def plain(connection: socket.socket) -> None:
        with contextlib.suppress(ConnectionError):
            handshake(connection, SECRET, "control", 0, initiator=True, seconds=1.0)

    for peer in (other_certificate, plain):
        refused = _against(peer, tls=TLS.context(server_side=True))
        assert isinstance(refused, HandshakeError) and "TLS with" in str(refused)


def test_a_forged_frame_from_the_driver_stops_the_member_without_decoding_it() -> None:
    (member_end, member_frames), (driver_end, _) = proven_pair()
    state = ControlState(ControlConnection(member_end, member_frames), threading.Event())
    reader = threading.Thread(target=state.read)
    try:
        reader.start()
        driver_end.sendall(struct.pack("<I", 8) + b"\0" * 32 + b"cos\nsystem\n")  # a pickle
        reader.join(WAIT)
        assert not reader.is_alive()
        assert state.stop_reason is not None and "failed authentication" in state.stop_reason
    finally:
        member_end.close()
        driver_end.close()
