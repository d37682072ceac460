"""The driver of a member's tasklets: cooperative ones round-robin, the rest on threads (§7.6)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from functools import partial

from jetspark.core.errors import JobCancelledError
from jetspark.core.runtime.closing import CloseStep, close_all
from jetspark.core.runtime.exchange import Exchange
from jetspark.core.runtime.metrics import JobMetrics, collect_metrics
from jetspark.core.runtime.plan import EdgePlan
from jetspark.core.runtime.priority import STALL_SECONDS, priority_stall
from jetspark.core.runtime.snapshot import SnapshotCoordinator
from jetspark.core.runtime.tasklet import DONE, ProcessorTasklet, Tasklet
from jetspark.core.runtime.wakeup import Wakeup
from jetspark.core.suppliers import ProcessorSupplier

MIN_BACKOFF_SECONDS = 0.000_01
MAX_BACKOFF_SECONDS = 0.001
QUIET_SECONDS = 0.1
"""After this long without progress a driver is quiet: it idles QUIET_BACKOFF_SECONDS at a time."""
QUIET_BACKOFF_SECONDS = 0.02
"""A quiet driver's wait: input from a thread or a socket still ends it at once (wakeup.py);
only a source that must be polled (a Kafka consumer, a journal) is asked up to this late."""


class Backoff:
    """Sleeps when nothing progressed: short at first, doubling, capped at 1 ms (§7.6.4); once
    nothing progressed for QUIET_SECONDS, QUIET_BACKOFF_SECONDS at a time, so a quiet member
    costs little of a core. Progress resets it."""

    __slots__ = ("_busy_until", "_delay")

    def __init__(self) -> None:
        self._delay = MIN_BACKOFF_SECONDS
        self._busy_until: float | None = None
        """When, at the cap, the driver turns quiet (None: not at the cap yet)."""

    def idle(self, wait: Callable[[float], object]) -> None:
        """Waits the current delay (`wait(seconds)`, which may return early when input
        arrives) and lengthens it (module constants)."""
        wait(self._delay)
        if self._delay < MAX_BACKOFF_SECONDS:
            self._delay = min(self._delay * 2, MAX_BACKOFF_SECONDS)
            return
        now = time.monotonic()
        if self._busy_until is None:
            self._busy_until = now + QUIET_SECONDS
        elif now >= self._busy_until:
            self._delay = QUIET_BACKOFF_SECONDS

    def reset(self) -> None:
        """Back to the shortest delay, after progress."""
        self._delay = MIN_BACKOFF_SECONDS
        self._busy_until = None


class MemberRuntime:
    """Runs the tasklets `build_member` made until all are done, then closes everything.

    Drive it with `run()` (blocking, with backoff), or step by step with `run_iter()`, a
    generator yielding after every round whether anything progressed, so a Spark task can
    interleave rounds with handing on records and pulling input. Either way the end is the
    same: non-cooperative threads are stopped and joined (waiting `stop_timeout` seconds at
    most in all), `close()` runs on every processor whose `init()` was called, then every
    supplier's `close(error)`.
    With `snapshots`, every round starts with the coordinator's `tick()`, and a successful
    end tells it the job completed (the final states count as committed).
    """

    def __init__(
        self,
        tasklets: Sequence[Tasklet],
        suppliers: Sequence[tuple[str, ProcessorSupplier]],
        *,
        edges: Sequence[EdgePlan],
        exchange: Exchange | None,
        slow_callback_millis: float | None = None,
        cancel_event: threading.Event | None = None,
        stop_timeout: float = 5.0,
        snapshots: SnapshotCoordinator | None = None,
    ) -> None:
        self.tasklets = list(tasklets)
        self.snapshots = snapshots
        """The job's snapshot coordinator, None without a processing guarantee."""
        self._suppliers = list(suppliers)
        self._edges = list(edges)
        self._exchange = exchange
        self._slow = slow_callback_millis / 1000 if slow_callback_millis is not None else None
        self._cancel = cancel_event if cancel_event is not None else threading.Event()
        self._stop_timeout = stop_timeout
        self._cooperative: list[Tasklet] = []
        self._init_called: list[Tasklet] = []
        """Tasklets whose `init()` was called (even if it raised): only they are closed."""
        self._threads: list[tuple[threading.Thread, Tasklet]] = []
        self._stopping = False
        self._thread_error: BaseException | None = None
        self.on_thread_failure: Callable[[BaseException], None] | None = None
        """Called on the failing thread when a non-cooperative tasklet fails (the driving
        thread notices at its next round, unless a blocking cooperative callback holds it)."""
        self.running: Tasklet | None = None
        """The cooperative tasklet being called (None between rounds): who blocks a stuck job."""
        self._abandoned = False
        self._shutdown_lock = threading.Lock()
        self._shut_down = False
        self._current_call: tuple[Tasklet, float] | None = None
        """With a slow-callback limit: the cooperative call under way and when it started."""
        self._warned_call: tuple[Tasklet, float] | None = None
        self._watchdog_stop = threading.Event()
        self._last_thread_progress = 0.0
        """When a non-cooperative tasklet last made progress (time.monotonic)."""
        self._thread_returned: dict[int, float] = {}
        """id(non-cooperative tasklet) -> when its last call returned (time.monotonic)."""
        self.wakeup = Wakeup()
        """Ends the cooperative loop's idle wait when a thread pushes into its queues."""
        self._thread_wakeups: dict[int, Wakeup] = {}
        """id(non-cooperative tasklet) -> the wake-up of its thread."""

    def cancel(self) -> None:
        """Asks the runtime to stop; the driving call raises JobCancelledError at its next round."""
        self._cancel.set()

    def run(self) -> None:
        """Drives the tasklets to the end on this thread (see `drive`)."""
        for _ in self.drive():
            pass

    def drive(self, wait: Callable[[float], object] | None = None) -> Iterator[None]:
        """Drives the tasklets to the end, yielding after every round (a Spark task hands its
        records on there), waiting briefly when nothing moves, until input arrives from a
        thread (`wakeup`) or from what `wait(seconds)` watches besides it (a continuous
        member's sockets: its selector must watch `wakeup` too).

        When nothing has moved for `priority.STALL_SECONDS` while a processor waits for an
        inbound edge of its current priority behind another edge's full queue (the priority
        trap), the job fails with that diagnosis instead of hanging.
        """
        backoff = Backoff()
        idle_wait = partial(self.wakeup.wait, block=wait)
        rounds = self.run_iter()
        stalled_since: float | None = None
        for progress in rounds:
            yield
            if progress:
                backoff.reset()
                stalled_since = None
                continue
            now = time.monotonic()
            if stalled_since is None or self._last_thread_progress > stalled_since:
                stalled_since = now
            elif now - stalled_since >= STALL_SECONDS and self._threads_spin(stalled_since):
                stalled_since = now
                trap = priority_stall(self.tasklets, self._edges)
                if trap is not None:
                    rounds.throw(trap)
            backoff.idle(idle_wait)

    def run_iter(self) -> Generator[bool, None, None]:
        """Starts the tasklets, then yields after each round whether it made progress.

        Returns when all tasklets are done; raises JobFailedError or JobCancelledError. Closing
        the generator early (a killed Spark task) stops and closes everything as well.
        """
        error: BaseException | None = None
        try:
            self._start()
            while True:
                progress = self.step()
                if self._finished():
                    break
                yield progress
            if self.snapshots is not None:
                self.snapshots.job_completed()
        except BaseException as failure:
            error = failure
            raise
        finally:
            self._shutdown(error)

    def step(self) -> bool:
        """One round over the cooperative tasklets; True if any made progress."""
        if self._cancel.is_set():
            raise JobCancelledError("the job was cancelled")
        if self._thread_error is not None:
            raise self._thread_error
        self.wakeup.begin_round()
        if self.snapshots is not None:
            self.snapshots.tick()
        tasklets = self._cooperative
        slow = self._slow
        progress = 0
        finished: list[Tasklet] = []
        for tasklet in tasklets:
            self.running = tasklet
            result = tasklet.call() if slow is None else self._timed_call(tasklet, slow)
            if self._abandoned:
                raise JobCancelledError("the job was cancelled while a callback blocked it")
            progress |= result
            if result == DONE:
                finished.append(tasklet)
        self.running = None
        if finished:
            self._cooperative = [t for t in tasklets if t not in finished]
        return bool(progress)

    def _threads_spin(self, since: float) -> bool:
        """True when every live non-cooperative tasklet has returned from a call after `since`
        (so none is inside a long callback that may yet make progress)."""
        returned = self._thread_returned
        return all(
            returned.get(id(tasklet), 0.0) > since
            for thread, tasklet in self._threads
            if thread.is_alive()
        )

    def metrics(self) -> JobMetrics:
        """A snapshot of the processors' and edges' counters; callable from any thread."""
        traffic = self._exchange.traffic() if self._exchange is not None else {}
        processors = [t for t in self.tasklets if isinstance(t, ProcessorTasklet)]
        return collect_metrics(processors, self._edges, traffic)

    def abandon(self, error: BaseException) -> Tasklet | None:
        """Ends a job whose driving thread is stuck inside a cooperative callback (called from
        another thread once `stop_timeout` has passed after a cancel or a failure, `error`):
        stops and closes everything but the stuck processor, whose thread is left running, and
        returns it; when that callback returns at last, the driving call raises
        JobCancelledError at once. Returns None, doing nothing, when no cooperative callback is
        running or the runtime is already shutting down."""
        stuck = self.running
        if stuck is None or self._shut_down:
            return None
        self._abandoned = True
        self._shutdown(error, stuck)
        return stuck

    def _timed_call(self, tasklet: Tasklet, limit: float) -> int:
        start = time.perf_counter()
        self._current_call = (tasklet, start)
        result = tasklet.call()
        self._current_call = None
        took = time.perf_counter() - start
        if took > limit:
            tasklet.logger.warning(
                "%s: cooperative callback %s took %.1f ms (limit %.1f ms); a cooperative "
                "processor should return within about a millisecond",
                tasklet.name,
                tasklet.callback,
                took * 1000,
                limit * 1000,
            )
        return result

    def _watch_slow_calls(self, limit: float) -> None:
        """The slow-callback warning for a callback that has not returned yet (it blocks)."""
        while not self._watchdog_stop.wait(max(limit / 2, 0.01)):
            call = self._current_call
            if call is None or call is self._warned_call:
                continue
            tasklet, start = call
            took = time.perf_counter() - start
            if took > limit:
                self._warned_call = call
                tasklet.logger.warning(
                    "%s: cooperative callback %s is still running after %.1f ms (limit %.1f ms); "
                    "a cooperative processor must not block: it stops every processor of its "
                    "thread",
                    tasklet.name,
                    tasklet.callback,
                    took * 1000,
                    limit * 1000,
                )

    def _start(self) -> None:
        if self._slow is not None:
            threading.Thread(
                target=self._watch_slow_calls,
                args=(self._slow,),
                name="jetspark-slow-callback-watchdog",
                daemon=True,
            ).start()
        for tasklet in self.tasklets:
            self._init_called.append(tasklet)
            self.running = tasklet
            tasklet.init()
        self.running = None
        for tasklet in self.tasklets:
            if tasklet.is_cooperative():
                self._cooperative.append(tasklet)
                tasklet.wake_on_input(self.wakeup)
            else:
                wakeup = self._thread_wakeups[id(tasklet)] = Wakeup()
                tasklet.wake_on_input(wakeup)
                thread = threading.Thread(
                    target=self._run_on_thread,
                    args=(tasklet, wakeup),
                    name=f"jetspark-{tasklet.name}",
                    daemon=True,
                )
                self._threads.append((thread, tasklet))
                thread.start()

    def _run_on_thread(self, tasklet: Tasklet, wakeup: Wakeup) -> None:
        backoff = Backoff()
        try:
            while not self._stopping:
                wakeup.begin_round()
                result = tasklet.call()
                if result == DONE:
                    return
                self._thread_returned[id(tasklet)] = now = time.monotonic()
                if result:
                    self._last_thread_progress = now
                    backoff.reset()
                else:
                    backoff.idle(wakeup.wait)
        except BaseException as error:
            if self._thread_error is None:
                self._thread_error = error
                if self.on_thread_failure is not None:
                    self.on_thread_failure(error)

    def _finished(self) -> bool:
        if self._cooperative or any(thread.is_alive() for thread, _ in self._threads):
            return False
        if self._thread_error is not None:
            raise self._thread_error
        return True

    def _shutdown(self, error: BaseException | None, blocked: Tasklet | None = None) -> None:
        """Stops the threads and closes everything, once (`abandon` may get here first);
        `blocked`, a cooperative tasklet stuck in a callback, is not closed."""
        with self._shutdown_lock:
            if self._shut_down:
                return
            self._shut_down = True
        self._stopping = True
        self._watchdog_stop.set()
        for wakeup in self._thread_wakeups.values():
            wakeup.notify()
        deadline = time.monotonic() + self._stop_timeout
        stuck = set() if blocked is None else {id(blocked)}
        for thread, tasklet in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
            if not thread.is_alive():
                self._thread_wakeups[id(tasklet)].close()
            else:
                stuck.add(id(tasklet))
                tasklet.logger.warning(
                    "%s: still inside %s %.1f s after the job stopped; its thread is left "
                    "running and the processor is not closed",
                    tasklet.name,
                    tasklet.callback,
                    self._stop_timeout,
                )
        steps: list[CloseStep] = []
        if self.snapshots is not None:  # before `close`: a cancelled run still publishes
            steps += self.snapshots.owed_commits(stuck)
        steps += [
            (_vertex_of(t), _index_of(t), "close", t.close)
            for t in self._init_called
            if id(t) not in stuck
        ]
        if isinstance(error, GeneratorExit):
            error = JobCancelledError("the driving generator was closed before the job ended")
        steps += [
            (vertex, None, "ProcessorSupplier.close", partial(supplier.close, error))
            for vertex, supplier in self._suppliers
        ]
        self.wakeup.close()
        close_all(steps, error)


def _vertex_of(tasklet: Tasklet) -> str:
    return getattr(tasklet, "vertex_name", tasklet.name)


def _index_of(tasklet: Tasklet) -> int | None:
    return getattr(tasklet, "index", None)
