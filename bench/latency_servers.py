"""The two TCP servers the latency rows measure with, each a process of its own on 127.0.0.1
(outside the engine, and outside the benchmark's own process and its GIL):

- the event server paces events at the rate its parent sets (and changes) to the clients that
  connect (`stream_socket_p` processors, Structured Streaming's socket source), dealt
  round-robin, or to resuming clients (a replayable source) from where each says it is. Each
  event is a line `n due_us sent_us`: its number, the wall-clock microsecond it was due
  (`Schedule`), and the one it was written to the socket (later when the machine is loaded, or
  while no client is connected);
- the arrival server accepts any number of clients (`write_socket_p` processors, a `foreach`
  writer) and notes the wall-clock microsecond each chunk arrived; a line arrived with the chunk
  that holds its end. It only keeps the chunks while it runs and parses them when it stops.
  Watching a directory instead, it notes when each `part-*` file appeared in it (a
  transactional sink renames a file into place whole when its snapshot commits).

`python -m bench.latency_servers send dealt|resuming RESULT`, `... receive RESULT` and `... watch
DIRECTORY RESULT` run them; each prints its port (the watcher's is unused), then obeys the
commands its parent writes to its stdin, one a line (the `EventServer` and `ArrivalServer`
handles below).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import subprocess
import sys
import tempfile
import time
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

PACE_SECONDS = 0.001
"""The event server sends what is due at most this often."""
RESUME_EVENTS = 4096
"""The most events a resuming client is sent at a time."""
WATCH_SECONDS = 0.002
"""How often the watcher looks for new files."""
STOP_SECONDS = 5.0
"""How long the arrival server, told to stop, waits for its clients to close their ends."""
_READ_BYTES = 1 << 16
_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Schedule:
    """When each event is due: segments `(first n, wall-clock µs it is due, events a
    second)`, a segment from each moment the rate was set."""

    segments: tuple[tuple[int, int, int], ...]

    def due_us(self, n: Any) -> Any:
        """The wall-clock microsecond event n is due (n an int or an int64 array)."""
        if isinstance(n, np.ndarray):
            firsts, starts, rates = (
                np.array(column) for column in zip(*self.segments, strict=True)
            )
            index = np.searchsorted(firsts, n, side="right") - 1
            return starts[index] + (n - firsts[index]) * 1_000_000 // rates[index]
        first, start_us, rate = next(s for s in reversed(self.segments) if s[0] <= n)
        return start_us + (n - first) * 1_000_000 // rate

    def due_by(self, now_us: int) -> int:
        """How many events are due at `now_us`."""
        first, start_us, rate = self.segments[-1]
        elapsed = now_us - start_us
        return first + ((elapsed + 1) * rate + 999_999) // 1_000_000 if elapsed >= 0 else first

    def at_rate(self, now_us: int, rate: int) -> Schedule:
        """This schedule with `rate` events a second from `now_us` on."""
        return Schedule((*self.segments, (self.due_by(now_us), now_us, rate)))


@dataclass(frozen=True)
class SentEvents:
    """What the event server sent: events 0..count-1, on `schedule`."""

    count: int
    schedule: Schedule
    lateness: np.ndarray
    """Per send: the due microsecond of its first event, and how late it was sent (µs)."""

    def lateness_p99_ms(self, start_us: int, end_us: int) -> float:
        """The p99 of how late the sends of events due from `start_us` to `end_us` were."""
        due, late = self.lateness.reshape(-1, 2).T
        within = late[(due >= start_us) & (due <= end_us)]
        return float(np.percentile(within, 99)) / 1000 if len(within) else 0.0


@dataclass(frozen=True)
class Arrivals:
    """Every line the arrival server received, as int columns, with its arrival microsecond."""

    columns: np.ndarray
    """One row per line, one int64 column per field of the line."""
    arrived_us: np.ndarray

    def __len__(self) -> int:
        return len(self.arrived_us)


class _Child:
    """A server process: started with `args`, its port read from its first line of output."""

    def __init__(self, *args: str) -> None:
        self._result = Path(tempfile.mkdtemp(prefix="jetspark-bench-latency-")) / "result"
        self._process = subprocess.Popen(
            [sys.executable, "-m", "bench.latency_servers", *args, str(self._result)],
            cwd=_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line.strip().isdigit():
            self.kill()
            raise RuntimeError(f"the latency server {args[0]!r} did not start: {line!r}")
        self.port = int(line)

    def ask(self, command: str) -> str:
        """Sends a command; returns the server's one-line answer."""
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(command + "\n")
        self._process.stdin.flush()
        return self._process.stdout.readline().strip()

    def result(self, command: str) -> Path:
        """Sends a command after which the server writes its result; the result file."""
        answer = self.ask(command)
        if answer != "done":
            raise RuntimeError(f"the latency server failed ({answer!r})")
        return self._result

    def kill(self) -> None:
        """Ends the process (closing its stdin, then by its PID if it must), and removes its
        result."""
        with contextlib.suppress(OSError):
            assert self._process.stdin is not None
            self._process.stdin.close()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(10)
        with contextlib.suppress(OSError):
            self._result.unlink()
            self._result.parent.rmdir()


class EventServer(_Child):
    """The event server's handle: `pace(rate)` sets the events per second from now on (the
    first call starts the events), `stop()` ends the stream and reports what was sent.
    `resuming`: every client first says `from N STEP` and gets events N, N+STEP, ... (a
    source that resumes from a snapshot)."""

    def __init__(self, resuming: bool = False) -> None:
        super().__init__("send", "resuming" if resuming else "dealt")

    def clients(self) -> int:
        """Clients connected now."""
        return int(self.ask("clients"))

    def pace(self, rate: int) -> None:
        """`rate` events a second from now on (the first call: event 0 is due now)."""
        self.ask(f"rate {rate}")

    def stop(self) -> SentEvents:
        """Ends the stream at the events due now: dealt clients are disconnected (a client
        that connects later finds the stream ended at once), resuming clients once they were
        sent every event of theirs up to it."""
        with np.load(self.result("stop")) as saved:
            segments = tuple(tuple(map(int, segment)) for segment in saved["segments"])
            return SentEvents(int(saved["count"]), Schedule(segments), saved["lateness"])


class ArrivalServer(_Child):
    """The arrival server's handle: `lines()` so far, `stop()` for every line received. With a
    `directory`, it watches the files that appear there instead of listening."""

    def __init__(self, directory: Path | None = None) -> None:
        super().__init__(*(("watch", str(directory)) if directory is not None else ("receive",)))

    def lines(self) -> int:
        """Lines received so far."""
        return int(self.ask("lines"))

    def stop(self) -> Arrivals:
        """Reads until every client closed its end (STOP_SECONDS at most); the lines received,
        parsed."""
        with np.load(self.result("stop")) as saved:
            return Arrivals(saved["columns"], saved["arrived_us"])


@contextlib.contextmanager
def servers(
    resuming: bool = False, watch: Path | None = None
) -> Iterator[tuple[EventServer, ArrivalServer]]:
    """An event server and an arrival server (watching `watch`, if given), both stopped on
    leaving."""
    sender = EventServer(resuming)
    try:
        receiver = ArrivalServer(watch)
    except BaseException:
        sender.kill()
        raise
    try:
        yield sender, receiver
    finally:
        sender.kill()
        receiver.kill()


# ------------------------------------------------------------------ the processes


def _now_us() -> int:
    return time.time_ns() // 1000


class _Loop:
    """A server's event loop: the listener, the parent's commands on stdin, the clients."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.setblocking(False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, "accept")
        self.selector.register(sys.stdin, selectors.EVENT_READ, "command")
        print(self.listener.getsockname()[1], flush=True)

    def events(self, timeout: float | None) -> list[tuple[Any, Any]]:
        """(what, key) of what is ready: "accept" (a client, accepted), "command" (the line),
        or a client's socket."""
        ready = []
        for key, _ in self.selector.select(timeout):
            if key.data == "accept":
                with contextlib.suppress(BlockingIOError):
                    connection, _ = self.listener.accept()
                    ready.append(("accept", connection))
            elif key.data == "command":
                ready.append(("command", sys.stdin.readline().strip()))
            else:
                ready.append(("client", key.fileobj))
        return ready

    @staticmethod
    def answer(text: str) -> None:
        print(text, flush=True)


class _Client:
    """A client of the event server: dealt events (`step` None), or resuming from `next`
    (sent without blocking, RESUME_EVENTS at a time, so that a client reading slowly, or not
    at all before it disconnects, holds up neither the others nor the server)."""

    __slots__ = ("connection", "ended", "next", "step", "unsent")

    def __init__(self, connection: socket.socket) -> None:
        connection.setblocking(True)
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.connection = connection
        self.next = 0
        self.step: int | None = None
        self.ended = False
        self.unsent = b""

    def resume(self, first: int, step: int) -> None:
        """The client said `from first step`."""
        self.next, self.step = first, step
        self.connection.setblocking(False)

    def send(self, schedule: Schedule, numbers: range, lateness: array[int]) -> None:
        """Sends events `numbers` (a dealt client), blocking while the client is behind; a
        client gone loses them (the arrivals show it)."""
        with contextlib.suppress(OSError):
            self.connection.sendall(_lines(schedule, numbers, lateness))

    def offer(self, schedule: Schedule, due: int, lateness: array[int]) -> None:
        """Sends what the socket takes now of the client's events before `due` (resuming)."""
        assert self.step is not None
        if not self.unsent:
            numbers = range(self.next, min(due, self.next + RESUME_EVENTS * self.step), self.step)
            if not numbers:
                return
            self.unsent = _lines(schedule, numbers, lateness)
            self.next = numbers[-1] + self.step
        try:
            self.unsent = self.unsent[self.connection.send(self.unsent) :]
        except BlockingIOError:
            return
        except OSError:  # gone: it comes back resuming from where it was
            self.unsent = b""

    def end(self) -> None:
        """Ends the stream after what was sent. The socket stays open until the client closes
        its end: closed now, with data the client has not read yet, it would be an orphan the
        kernel may reset (and a slow client would lose that data)."""
        if not self.ended:
            self.ended = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_WR)


def _lines(schedule: Schedule, numbers: range, lateness: array[int]) -> bytes:
    """Events `numbers` as lines stamped now; adds the first one's due time and how late it
    is to `lateness`."""
    sent_us = _now_us()
    first_due = schedule.due_us(numbers[0])
    lateness.extend((first_due, sent_us - first_due))
    return "".join(f"{n} {schedule.due_us(n)} {sent_us}\n" for n in numbers).encode("ascii")


def _send_main(resuming: bool, result: Path) -> None:
    """The event server (module docstring)."""
    loop = _Loop()
    clients: dict[socket.socket, _Client] = {}
    schedule: Schedule | None = None
    dealt = 0
    total: int | None = None
    """Set by "stop": the events there are (all of them due)."""
    lateness = array("q")

    def drop(client: _Client) -> None:
        loop.selector.unregister(client.connection)
        del clients[client.connection]
        client.connection.close()

    while True:
        for what, value in loop.events(None if schedule is None else PACE_SECONDS):
            if what == "accept":
                loop.selector.register(value, selectors.EVENT_READ, "client")
                clients[value] = _Client(value)
            elif what == "client":
                client = clients[value]
                said = b""
                with contextlib.suppress(OSError):
                    said = value.recv(_READ_BYTES)
                if not said or not resuming:  # a dealt client only ever closes its end
                    drop(client)
                else:  # "from N STEP"
                    _, first, step = said.split()
                    client.resume(int(first), int(step))
            elif value == "clients":
                loop.answer(str(sum(not client.ended for client in clients.values())))
            elif value.startswith("rate "):  # the first one starts the events
                now, rate = _now_us(), int(value.split()[1])
                schedule = (
                    Schedule(((0, now, rate),)) if schedule is None else schedule.at_rate(now, rate)
                )
                loop.answer("ok")
            elif value == "stop":
                assert schedule is not None
                total = schedule.due_by(_now_us())
                if not resuming:
                    dealt = _deal(schedule, clients.values(), dealt, total, lateness)
                    total = dealt  # what no client was there to take was never sent
                with open(result, "wb") as out:
                    np.savez(out, count=total, segments=schedule.segments, lateness=lateness)
                loop.answer("done")
            elif value == "":  # the parent closed our stdin: exit
                return
        if schedule is None:
            continue
        due = total if total is not None else schedule.due_by(_now_us())
        if not resuming:
            if total is None:
                dealt = _deal(schedule, clients.values(), dealt, due, lateness)
            else:
                for client in clients.values():
                    client.end()  # the stream has ended, for anyone who comes now too
            continue
        for client in clients.values():
            if client.step is None or client.ended:
                continue
            client.offer(schedule, due, lateness)
            if total is not None and client.next >= total and not client.unsent:
                client.end()


def _deal(
    schedule: Schedule, clients: Iterable[_Client], dealt: int, due: int, lateness: array[int]
) -> int:
    """Deals events dealt..due-1 round-robin to the clients; returns how many are dealt."""
    ready = [client for client in clients if not client.ended]
    if not ready:
        return dealt
    for offset, client in enumerate(ready):
        if numbers := range(dealt + offset, due, len(ready)):
            client.send(schedule, numbers, lateness)
    return max(dealt, due)


def _receive_main(result: Path) -> None:
    """The arrival server (module docstring)."""
    loop = _Loop()
    chunks: dict[socket.socket, list[tuple[int, bytes]]] = {}
    received: list[list[tuple[int, bytes]]] = []
    lines = 0
    deadline: float | None = None
    """Set by "stop": until then the clients still connected may finish sending."""
    while deadline is None or (chunks and time.monotonic() < deadline):
        for what, value in loop.events(None if deadline is None else PACE_SECONDS):
            if what == "accept":
                loop.selector.register(value, selectors.EVENT_READ, "client")
                chunks[value] = []
            elif what == "client":
                try:
                    data = value.recv(_READ_BYTES)
                except OSError:  # the client broke the connection: as if it closed it
                    data = b""
                arrived = _now_us()
                if data:
                    chunks[value].append((arrived, data))
                    lines += data.count(b"\n")
                else:
                    loop.selector.unregister(value)
                    received.append(chunks.pop(value))
                    value.close()
            elif value == "lines":
                loop.answer(str(lines))
            elif value in ("stop", ""):  # "": the parent closed our stdin
                deadline = time.monotonic() + STOP_SECONDS
                loop.selector.unregister(sys.stdin)
    for client, parts in chunks.items():
        received.append(parts)
        client.close()
    columns, arrived_us = _parse(received)
    with open(result, "wb") as out:
        np.savez(out, columns=columns, arrived_us=arrived_us)
    loop.answer("done")


def _watch_main(directory: Path, result: Path) -> None:
    """The arrival server watching `directory` (module docstring)."""
    loop = _Loop()
    seen: set[str] = set()
    files: list[list[tuple[int, bytes]]] = []
    while True:
        for _, value in loop.events(WATCH_SECONDS):
            if value == "lines":
                loop.answer(str(sum(data.count(b"\n") for ((_, data),) in files)))
            elif value in ("stop", ""):  # "": the parent closed our stdin
                _look(directory, seen, files)
                columns, arrived_us = _parse(files)
                with open(result, "wb") as out:
                    np.savez(out, columns=columns, arrived_us=arrived_us)
                loop.answer("done")
                return
        _look(directory, seen, files)


def _look(directory: Path, seen: set[str], files: list[list[tuple[int, bytes]]]) -> None:
    """Reads the `part-*` files of `directory` not seen yet, each noted with the time now."""
    try:
        entries = [entry for entry in os.scandir(directory) if entry.name.startswith("part-")]
    except FileNotFoundError:
        return  # not made yet
    for entry in entries:
        if entry.name not in seen:
            seen.add(entry.name)
            files.append([(_now_us(), Path(entry.path).read_bytes())])


def _parse(connections: list[list[tuple[int, bytes]]]) -> tuple[np.ndarray, np.ndarray]:
    """The lines of every connection's chunks as int columns, and their arrival times."""
    rows: list[list[int]] = []
    arrivals: list[int] = []
    for parts in connections:
        partial = b""
        for arrived, data in parts:
            pieces = (partial + data).split(b"\n")
            partial = pieces.pop()
            rows.extend([int(field) for field in line.split()] for line in pieces)
            arrivals.extend([arrived] * len(pieces))
    widths = {len(row) for row in rows}
    if len(widths) > 1:
        raise ValueError(f"lines with different numbers of fields arrived: {sorted(widths)}")
    columns = np.array(rows, dtype=np.int64).reshape(len(rows), widths.pop() if rows else 0)
    return columns, np.array(arrivals, dtype=np.int64)


def main(argv: list[str]) -> None:
    """`send dealt|resuming RESULT`, `receive RESULT` or `watch DIRECTORY RESULT`."""
    if argv[0] == "send":
        _send_main(argv[1] == "resuming", Path(argv[2]))
    elif argv[0] == "receive":
        _receive_main(Path(argv[1]))
    elif argv[0] == "watch":
        _watch_main(Path(argv[1]), Path(argv[2]))
    else:
        raise SystemExit("usage: python -m bench.latency_servers send|receive|watch ... RESULT")


if __name__ == "__main__":
    main(sys.argv[1:])
