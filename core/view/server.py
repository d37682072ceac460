"""JobView: the live job view's HTTP server, on a thread of its own.

Routes: `/` the page (it polls the JSON below every second), `/api/jobs` the watched jobs,
`/api/jobs/<id>` one job's model (model.py), `/api/jobs/<id>/dag.svg` its DAG's picture,
`/metrics` every watched job's figures in Prometheus' text format. An id that is not an
ASCII decimal of at most ID_DIGITS digits is no page (404). A client that has not sent its whole
request within the view's request deadline (however it trickles the bytes), or stalls a read or
write for the request timeout, is disconnected; one that leaves before its answer is written is
noted in the debug log only. At most `max_connections` connections are handled at once, each on
a thread of its own: any more are answered 503 by the server's loop and closed at once.
"""

from __future__ import annotations

import contextlib
import io
import ipaddress
import itertools
import json
import logging
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import CONTENT_TYPE_LATEST

from jetspark.core.dag import DAG
from jetspark.core.job import Job
from jetspark.core.view.model import Clock, JobSampler
from jetspark.core.view.picture import dag_svg
from jetspark.core.view.prometheus import exposition

_log = logging.getLogger("jetspark.view")

WATCHED_JOBS = 20
"""Jobs a view keeps: watching one more forgets the oldest that has ended (never one that
is still running)."""

SHUTDOWN_POLL_SECONDS = 0.1
"""How often the server's loop looks whether `close()` was called."""

REQUEST_TIMEOUT_SECONDS = 10.0
"""How long the view waits for each read from or write to a client before hanging up."""

REQUEST_DEADLINE_SECONDS = 5.0
"""How long a client may take to send its whole request, from its connection on: a browser or
Prometheus sends it in one packet, so this is slack for slow networks, and the most a client
sending a byte now and then holds one of the view's threads."""

MAX_CONNECTIONS = 32
"""Connections a view handles at once, each on a thread: far more than the page (a request a
second per open tab) and Prometheus (one per scrape) need, and the most threads a flood of
clients takes from the driver."""

BUSY_RETRY_AFTER_SECONDS = 1
"""The `Retry-After` of the 503 that a connection beyond `max_connections` gets."""

ID_DIGITS = 9
"""The most digits of a job's id in a path: a view numbers its jobs from 1."""

_JOB_ID = re.compile(f"[0-9]{{1,{ID_DIGITS}}}")
_SHOWN_PATH = 100
"""The most characters of a requested path an answer or a log line repeats."""

_Answer = tuple[int, str, bytes]
"""HTTP status, content type, body."""


class JobView:
    """A live view of jobs, served over HTTP at `url`: the page of the newest watched job (or
    of another, chosen on the page), its figures as JSON, and `/metrics` for Prometheus.

    Start one with `JobView.serve()`; `watch(job, dag)` adds a job (an engine given
    `job_view=` does that for every job it starts); `close()` stops the server.
    """

    def __init__(self, server: _Server, clock: Clock, dot: str) -> None:
        """Use `JobView.serve()`, which binds the server and starts its thread."""
        self._server = server
        self._clock = clock
        self._dot = dot
        self._lock = threading.Lock()
        self._samplers: dict[int, JobSampler] = {}
        """The view's number for a job -> its sampler."""
        self._pictures: dict[int, str] = {}
        self._numbers = itertools.count(1)
        self._thread = threading.Thread(
            target=server.serve_forever,
            args=(SHUTDOWN_POLL_SECONDS,),
            name="jetspark-job-view",
            daemon=True,
        )
        server.view = self

    @classmethod
    def serve(
        cls,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        clock: Clock = time.time,
        dot: str = "dot",
        request_timeout: float = REQUEST_TIMEOUT_SECONDS,
        request_deadline: float = REQUEST_DEADLINE_SECONDS,
        max_connections: int = MAX_CONNECTIONS,
        monotonic: Callable[[], float] = time.monotonic,
        allowed_hosts: Iterable[str] = (),
    ) -> JobView:
        """Starts a view listening on `host`:`port` (0: any free port; see `url`). `clock` is
        the wall clock of rates and watermark lag; `dot` the Graphviz program drawing DAGs;
        `request_timeout` the seconds a client may stall a read of its request or a write of
        the answer, `request_deadline` the seconds (on the clock `monotonic`) it may take to
        send its whole request, before the view hangs up. Connections beyond `max_connections`
        handled at once get 503 with `Retry-After` and are closed. A request is answered only
        when its `Host` names an IP address, `localhost`, or one of `allowed_hosts` (the names
        the view is reached by): a page of another site that a DNS name was pointed at this
        machine cannot read it."""
        if type(port) is not int or not 0 <= port <= 65535:
            raise ValueError(f"the job view's port must be an int from 0 to 65535, got {port!r}")
        _check_seconds("request_timeout", request_timeout)
        _check_seconds("request_deadline", request_deadline)
        if type(max_connections) is not int or max_connections < 1:
            raise ValueError(
                f"the job view's max_connections must be a positive int, got {max_connections!r}"
            )
        try:
            server = _Server((host, port), _Handler)
        except OSError as error:
            raise OSError(
                error.errno, f"the job view cannot listen on {host}:{port}: {error.strerror}"
            ) from error
        server.request_timeout = float(request_timeout)
        server.request_deadline = float(request_deadline)
        server.monotonic = monotonic
        server.slots = threading.BoundedSemaphore(max_connections)
        server.busy_answer = _busy_answer(max_connections)
        server.allowed_hosts = frozenset(name.lower().rstrip(".") for name in allowed_hosts)
        view = cls(server, clock, dot)
        view._thread.start()
        _log.info("job view at %s", view.url)
        return view

    @property
    def url(self) -> str:
        """The page's address, e.g. `http://127.0.0.1:41327/`."""
        host, port = self._server.server_address[:2]
        assert isinstance(host, str)  # an AF_INET address: (host, port)
        return f"http://{host}:{port}/"

    def watch(self, job: Job, dag: DAG) -> None:
        """Shows `job`, which runs `dag`, from now on (until WATCHED_JOBS newer ones ended);
        a job watched already stays as it is."""
        if not isinstance(job, Job):
            raise TypeError(f"JobView.watch() takes a Job, got {type(job).__name__} {job!r:.60}")
        if not isinstance(dag, DAG):
            raise TypeError(
                f"JobView.watch() takes the DAG job '{job.name}' runs, "
                f"got {type(dag).__name__} {dag!r:.60}"
            )
        with self._lock:
            if any(s.job is job for s in self._samplers.values()):
                return
            view_id = next(self._numbers)
            self._samplers[view_id] = JobSampler(view_id, job, dag, self._clock)
            ended = [i for i, s in self._samplers.items() if s.job.status.is_terminal]
            for forgotten in ended[: max(0, len(self._samplers) - WATCHED_JOBS)]:
                del self._samplers[forgotten]
                self._pictures.pop(forgotten, None)

    def close(self) -> None:
        """Stops serving and closes the socket; the jobs go on."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> JobView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------- the routes

    def _answer(self, path: str) -> _Answer:
        """What a GET of `path` returns."""
        if path == "/":
            page = resources.files(__package__).joinpath("page.html").read_bytes()
            return 200, "text/html; charset=utf-8", page
        if path == "/metrics":
            return 200, CONTENT_TYPE_LATEST, exposition(self._watched(), self._clock)
        if path == "/api/jobs":
            jobs = [
                {
                    "id": s.view_id,
                    "job_id": s.job.id,
                    "name": s.job.name,
                    "status": s.job.status.value,
                }
                for s in self._watched()
            ]
            return _json(200, jobs)
        parts = path.split("/")
        if (
            len(parts) in (4, 5)
            and parts[:3] == ["", "api", "jobs"]
            and _JOB_ID.fullmatch(parts[3])
        ):
            sampler = self._samplers.get(int(parts[3]))
            if sampler is None:
                return _json(404, {"error": f"this view watches no job {parts[3]}"})
            if len(parts) == 4:
                return self._model(sampler)
            if parts[4] == "dag.svg":
                return 200, "image/svg+xml", self._picture(sampler).encode()
        return _json(404, {"error": f"no such page: {_shown(path)}"})

    def _watched(self) -> list[JobSampler]:
        with self._lock:
            return list(self._samplers.values())

    def _model(self, sampler: JobSampler) -> _Answer:
        try:
            return _json(200, sampler.model())
        except Exception as error:
            _log.exception("the job view could not read the metrics of job '%s'", sampler.job.name)
            message = f"job '{sampler.job.name}': its metrics could not be read: {error!r}"
            return _json(500, {"error": message})

    def _picture(self, sampler: JobSampler) -> str:
        with self._lock:
            svg = self._pictures.get(sampler.view_id)
        if svg is None:
            svg = dag_svg(sampler.dag, self._dot)
            with self._lock:
                self._pictures[sampler.view_id] = svg
        return svg


def _check_seconds(name: str, seconds: object) -> None:
    """Refuses `seconds` for the parameter `name` unless it is a positive number."""
    if isinstance(seconds, bool) or not (isinstance(seconds, int | float) and seconds > 0):
        raise ValueError(
            f"the job view's {name} must be a positive number of seconds, got {seconds!r}"
        )


def _busy_answer(max_connections: int) -> bytes:
    """The whole HTTP answer to a connection beyond `max_connections`."""
    status = HTTPStatus.SERVICE_UNAVAILABLE
    _, content_type, body = _json(
        status,
        {
            "error": f"the job view handles {max_connections} connections at once; "
            f"retry in {BUSY_RETRY_AFTER_SECONDS} s"
        },
    )
    head = (
        f"HTTP/1.0 {status.value} {status.phrase}\r\n"
        f"Retry-After: {BUSY_RETRY_AFTER_SECONDS}\r\n"
        f"Content-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Cache-Control: no-store\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


def _json(status: int, body: Any) -> _Answer:
    return status, "application/json", json.dumps(body).encode()


def _shown(path: str) -> str:
    """`path` as an answer or a log line repeats it: at most _SHOWN_PATH characters."""
    return path if len(path) <= _SHOWN_PATH else f"{path[:_SHOWN_PATH]}... ({len(path)} chars)"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    """Connections the kernel holds for the loop to accept: a burst of clients is accepted (or
    turned away) at once instead of retrying its connect seconds later."""
    view: JobView
    request_timeout: float
    request_deadline: float
    monotonic: Callable[[], float]
    slots: threading.BoundedSemaphore
    """One per connection that may be handled at once."""
    busy_answer: bytes
    allowed_hosts: frozenset[str]

    def process_request(self, request: Any, client_address: Any) -> None:
        """Hands the connection to a thread of its own if a slot is free, else turns it away
        on the server's loop, without waiting for the client."""
        if not self.slots.acquire(blocking=False):
            self._turn_away(request, client_address)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def _turn_away(self, connection: socket.socket, client_address: Any) -> None:
        """Answers 503 and closes `connection`, never blocking: an answer its send buffer does
        not take whole is cut short."""
        _log.debug("job view: every slot busy, turned away %s", client_address)
        connection.setblocking(False)
        with contextlib.suppress(OSError):
            connection.send(self.busy_answer)
            # what the client sent already: closing a socket with unread bytes resets it
            connection.recv(65536)
        self.shutdown_request(connection)

    def accepts_host(self, host_header: str | None) -> bool:
        """Whether a request with this `Host` header may be answered (none: not a browser)."""
        if host_header is None:
            return True
        name = urlsplit(f"//{host_header}").hostname
        if name is None:
            return False
        name = name.rstrip(".")
        if name == "localhost" or name in self.allowed_hosts:
            return True
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return False
        return True  # an address literal involves no DNS, so no name rebound to this machine

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that left or stalled is the debug log's business; anything else is logged
        as an error (never printed to stderr, as socketserver does)."""
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError | TimeoutError):
            _log.debug("job view: client %s left: %r", client_address, error)
        else:
            _log.exception("job view: the request of %s failed", client_address)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def setup(self) -> None:
        # the socket's, for every read and write (typeshed types it a ClassVar: it is per server)
        self.timeout = self.server.request_timeout  # type: ignore[misc]
        super().setup()
        self.rfile.close()  # the socket's own reader, which knows no deadline
        deadline = self.server.monotonic() + self.server.request_deadline
        self.rfile = io.BufferedReader(_DeadlineReader(self.connection, deadline, self.server))

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        host = self.headers.get("Host")
        try:
            if not self.server.accepts_host(host):
                _log.warning(
                    "job view: refused a request for Host %.100r from %s (JobView.serve("
                    "allowed_hosts=...) names the hosts it may be reached by)",
                    host,
                    self.client_address[0],
                )
                status, content_type, body = _json(
                    421, {"error": f"this view does not serve the host {(host or '')[:100]!r}"}
                )
            else:
                status, content_type, body = self.server.view._answer(path)
        except Exception as error:
            _log.exception("the job view failed to answer %s", _shown(path))
            status, content_type, body = _json(500, {"error": f"{_shown(path)}: {error!r}"})
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        _log.debug("job view: %s", _shown(format % args))


class _DeadlineReader(io.RawIOBase):
    """A connection's reading side that raises TimeoutError once `deadline` (on the server's
    `monotonic` clock) has passed, however slowly the bytes before it came."""

    def __init__(self, connection: socket.socket, deadline: float, server: _Server) -> None:
        self._connection = connection
        self._deadline = deadline
        self._server = server

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        remaining = self._deadline - self._server.monotonic()
        if remaining <= 0:
            raise TimeoutError(
                f"no whole request within the deadline of {self._server.request_deadline} s"
            )
        self._connection.settimeout(min(remaining, self._server.request_timeout))
        try:
            return self._connection.recv_into(buffer)
        finally:
            self._connection.settimeout(self._server.request_timeout)
