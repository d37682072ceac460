"""The live job view against slow and greedy clients (issue #44): a flood of clients sending a
byte now and then holds at most the view's pool of handler threads, the rest are turned away at
once with 503 and `Retry-After`, and a client that has not sent its whole request by the request
deadline is cut and its slot freed, however it trickles the bytes. The deadline's clock is the
test's own where the test needs time to pass; nothing here asserts how fast anything is."""

from __future__ import annotations

import http.client
import json
import select
import socket
import threading

import pytest
from test_view import Clock, wait_until

from jetspark.core.view import JobView
from jetspark.core.view.server import BUSY_RETRY_AFTER_SECONDS, MAX_CONNECTIONS

WAIT_SECONDS = 60.0
"""How long a test waits for the view to do something before it fails (never a speed claim)."""

READ_TIMEOUT_SECONDS = 2 * WAIT_SECONDS
"""The views' timeout of a single read, beyond any wait of the tests: what cuts a client here is
its request deadline."""

SLOW_CLIENTS = 100
UNFINISHED_REQUEST = b"GET /api/jobs HTTP/1.0\r\nX-Slow: "
"""A request whose header line the slow clients go on with one byte at a time, never ending it."""


def connect(view: JobView) -> socket.socket:
    host, port = view.url.split("/")[2].split(":")
    return socket.create_connection((host, int(port)), timeout=WAIT_SECONDS)


def rest_of(client: socket.socket) -> bytes:
    """Everything the view sends `client` until it closes the connection (a reset included)."""
    received = b""
    try:
        while chunk := client.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    return received


def has_closed(client: socket.socket) -> bool:
    """Whether the view closed `client`'s connection (looked at for a moment); it must not have
    answered the unfinished request."""
    if not select.select([client], [], [], 0.01)[0]:
        return False
    answer = rest_of(client)
    assert answer == b"", f"the view answered an unfinished request: {answer[:100]!r}"
    return True


def get(view: JobView, path: str) -> tuple[int, str | None, str]:
    """Status, `Retry-After` and body of a GET of `path`."""
    host, port = view.url.split("/")[2].split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=WAIT_SECONDS)
    try:
        connection.request("GET", path)
        answer = connection.getresponse()
        return answer.status, answer.getheader("Retry-After"), answer.read().decode()
    finally:
        connection.close()


def get_once_free(view: JobView, path: str) -> tuple[int, str]:
    """Status and body of a GET of `path`, asked again while the view answers 503 (busy)."""
    result: list[tuple[int, str]] = []

    def answered() -> bool:
        status, _, body = get(view, path)
        result[:] = [(status, body)]
        return status != 503

    wait_until(answered, f"a GET of {path} other than 503")
    return result[0]


def test_a_hundred_slow_clients_hold_at_most_the_pool_and_the_rest_get_503_at_once() -> None:
    clock = Clock(0.0)
    threads_before = threading.active_count()
    with JobView.serve(
        request_timeout=READ_TIMEOUT_SECONDS, request_deadline=WAIT_SECONDS, monotonic=clock
    ) as view:
        slow = [connect(view) for _ in range(SLOW_CLIENTS)]
        for client in slow:
            client.sendall(UNFINISHED_REQUEST[:1])
        held, turned_away = slow[:MAX_CONNECTIONS], slow[MAX_CONNECTIONS:]
        for client in turned_away:
            answer = rest_of(client)
            assert answer.startswith(b"HTTP/1.0 503 Service Unavailable\r\n"), answer[:100]
            assert f"\r\nRetry-After: {BUSY_RETRY_AFTER_SECONDS}\r\n".encode() in answer
        # a handler thread per held client, and the view's own loop; none for the turned away
        assert threading.active_count() - threads_before <= MAX_CONNECTIONS + 1
        status, retry_after, body = get(view, "/api/jobs")  # the 101st client
        assert (status, retry_after) == (503, str(BUSY_RETRY_AFTER_SECONDS))
        assert json.loads(body)["error"] == (
            f"the job view handles {MAX_CONNECTIONS} connections at once; "
            f"retry in {BUSY_RETRY_AFTER_SECONDS} s"
        )

        clock.now += WAIT_SECONDS  # past the held clients' deadline
        for client in held:
            client.sendall(UNFINISHED_REQUEST[1:2])  # their next byte
        for client in held:
            assert rest_of(client) == b"", "cut without an answer"
        # the flood's sockets are still open on their side: the view serves the next client
        assert get_once_free(view, "/api/jobs") == (200, "[]")
        for client in slow:
            client.close()
    wait_until(lambda: threading.active_count() <= threads_before, "the view's threads to end")


def test_a_client_trickling_its_request_is_cut_at_the_deadline_and_its_slot_freed() -> None:
    clock = Clock(0.0)
    with JobView.serve(
        request_timeout=READ_TIMEOUT_SECONDS,
        request_deadline=5.0,
        max_connections=1,
        monotonic=clock,
    ) as view:
        with connect(view) as trickling:
            trickling.sendall(UNFINISHED_REQUEST)
            for _ in range(20):  # bytes within the deadline: the client stays connected
                trickling.sendall(b"a")
                assert not has_closed(trickling)
            clock.now = 4.9
            trickling.sendall(b"a")
            assert not has_closed(trickling)
            assert get(view, "/api/jobs")[0] == 503, "the trickling client holds the only slot"
            clock.now = 5.0
            trickling.sendall(b"a")
            wait_until(lambda: has_closed(trickling), "the view to cut the trickling client")
        assert get_once_free(view, "/api/jobs") == (200, "[]")


@pytest.mark.parametrize("trickles", [True, False], ids=["trickling", "silent"])
def test_the_deadline_on_the_real_clock_cuts_a_client_the_read_timeout_would_keep(
    trickles: bool,
) -> None:
    with JobView.serve(
        request_timeout=READ_TIMEOUT_SECONDS, request_deadline=0.2, max_connections=1
    ) as view:
        with connect(view) as client:
            client.sendall(UNFINISHED_REQUEST)

            def cut() -> bool:
                if trickles:
                    try:
                        client.sendall(b"a")
                    except (BrokenPipeError, ConnectionResetError):
                        return True  # the view closed the connection and reset the byte
                return has_closed(client)

            wait_until(cut, "the view to cut a client at its request deadline")
        assert get_once_free(view, "/api/jobs") == (200, "[]")


def test_the_new_limits_are_refused_unless_positive() -> None:
    with pytest.raises(
        ValueError, match="request_deadline must be a positive number of seconds, got 0"
    ):
        JobView.serve(request_deadline=0)
    for wrong in (0, True, 1.5):
        with pytest.raises(
            ValueError, match=f"max_connections must be a positive int, got {wrong}"
        ):
            JobView.serve(max_connections=wrong)  # type: ignore[arg-type]
