"""The driver: calls one processor slot's callbacks as the engine would and checks the contract.

A slot holds one processor at a time; a snapshot restore replaces it with a new instance. Every
output item is recorded with where it came from (callback, input item, restores so far), so a
failure can say which step of the run produced the wrong output.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from jetspark.core.context import Context
from jetspark.core.errors import CallbackResultError, ProcessorContractError
from jetspark.core.processor import Processor
from jetspark.core.runtime.tasklet import returned_bool
from jetspark.core.serialization import decode_batch, encode_batch
from jetspark.core.test_support.boxes import TestInbox, TestOutbox
from jetspark.core.test_support.inputs import InputItem, fill_inbox_end, show
from jetspark.core.test_support.modes import TestMode
from jetspark.core.watermark import Watermark

T = TypeVar("T")

NON_COOPERATIVE_CAPACITY = 1024
"""Bucket capacity for non-cooperative processors, which may emit a lot in one call."""

_CONTRACT_FIX = (
    "after a refused offer, return from the callback and offer that same item first on the next "
    "call; emit_from_traverser() and FlatMapper keep the refused item for you"
)


class VerificationFailure(AssertionError):
    """A processor failed the verification; the message says where and why."""

    __module__ = "jetspark.core.test_support"  # where users import it from


@dataclass(frozen=True)
class Settings:
    """The builder options the driver obeys."""

    assert_progress: bool = True
    cooperative_timeout_ms: float = 1000.0
    log: bool = True
    call_budget: int = 10_000
    """How many process/watermark/complete calls a run may take before it counts as endless."""


@dataclass(frozen=True)
class Origin:
    """Where an output item came from: the step of the run and the restores before it."""

    step: str
    restores: int
    last_restore: str | None

    def __str__(self) -> str:
        if not self.restores:
            return self.step
        return f"{self.step}, after {self.restores} restore(s), the last {self.last_restore}"


class Driver:
    """Runs one processor slot of one verification run and records its output."""

    def __init__(
        self,
        new_processor: Callable[[], Processor],
        context: Context,
        settings: Settings,
        mode: TestMode,
        ordinal_count: int,
        run_name: str,
    ) -> None:
        self.new_processor = new_processor
        self.context = context
        self.settings = settings
        self.mode = mode
        self.run_name = run_name
        self.outputs: list[list[Any]] = [[] for _ in range(ordinal_count)]
        self.origins: list[list[Origin]] = [[] for _ in range(ordinal_count)]
        self.notes: list[str] = []
        """Suspicious events (refused output of a removed input item) for failure messages."""
        self.restores = 0
        self.last_restore: str | None = None
        self.processor: Processor = Processor()
        self.outbox = TestOutbox()
        self.cooperative = True
        self._snapshots = 0
        self._calls = 0
        self._completed = False
        self._callback = "init()"
        self._input: InputItem | None = None
        """The input item at the head of the inbox when the current callback started."""
        self._batch: Sequence[InputItem] = ()
        self._inbox: TestInbox | None = None
        """The batch and inbox of the process() calls under way, to tell which items they took."""
        self._refused: tuple[Any, str] | None = None
        """The pending refused item and the step that offered it."""

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Creates a new processor instance with a new outbox and calls its `init()`."""
        processor = self.new_processor()
        self.cooperative = processor.is_cooperative()
        capacity = 1 if self.cooperative else NON_COOPERATIVE_CAPACITY
        self.outbox = TestOutbox(*[capacity] * len(self.outputs), snapshot_capacity=capacity)
        self.outbox.owner = type(processor).__name__
        self.processor = processor
        self._callback = "init()"
        self._call(lambda: processor.init(self.outbox, self.context), timed=False)
        self._after_call(progressed=True)

    def close(self) -> None:
        """Calls `close()`; anything it emits would never reach downstream, so it fails."""
        self._callback = "close()"
        self._call(self.processor.close, timed=False)
        emitted = [item for bucket in self.outbox.buckets for item in bucket]
        if emitted:
            raise self._failure(
                f"{self._where()} emitted {show(emitted)}: close() runs after the last drain of "
                "the outbox, so these items are lost; emit them in complete()"
            )

    # ------------------------------------------------------------------ input

    def feed(self, items: Sequence[InputItem], take_snapshots: bool) -> None:
        """Delivers `items` (watermarks via try_process_watermark); snapshots when inbox drains."""
        if take_snapshots:
            self.snapshot_point("before any input")
        start = 0
        while start < len(items):
            if isinstance(items[start].item, Watermark):
                self._deliver_watermark(items[start])
                start += 1
            else:
                end = fill_inbox_end(items, start, self.mode.inbox_size)
                self._process_batch(items[start:end])
                start = end
            if take_snapshots:
                self.snapshot_point(f"after {items[start - 1]}")

    def _process_batch(self, batch: Sequence[InputItem]) -> None:
        inbox = TestInbox(entry.item for entry in batch)
        ordinal = batch[0].ordinal
        self.log(f"Input-{ordinal}: {[entry.item for entry in batch]!r}")
        self._batch, self._inbox = batch, inbox
        while not inbox.is_empty():
            before = len(inbox)
            self._callback = f"process(ordinal {ordinal})"
            self._input = batch[len(batch) - before]
            blocked = self._next_call()
            self._call(lambda: self.processor.process(ordinal, inbox))
            self._after_call(len(inbox) < before or self._emitted(), blocked)
            if inbox.is_empty() and self.outbox.refused_item() is not None:
                self._note_removed_with_refused_output(batch[-1])
        self._inbox = None

    def _deliver_watermark(self, entry: InputItem) -> None:
        watermark = entry.item
        self.log(f"Input-{entry.ordinal}: {watermark!r}")
        self._callback = f"try_process_watermark({watermark})"
        self._input = entry
        done = False
        while not done:
            blocked = self._next_call()
            done = self._call_bool(
                lambda: self.processor.try_process_watermark(watermark), "try_process_watermark"
            )
            self._after_call(done or self._emitted(), blocked)
        self._check_nothing_refused_when_done()
        self._callback = "the engine's forwarding after try_process_watermark() returned True"
        for ordinal in range(len(self.outputs)):
            self._record(ordinal, watermark)

    def complete(self, take_snapshots: bool) -> None:
        """Calls `complete()` until True; snapshots between calls if `take_snapshots` (sources)."""
        done = False
        while not done:
            self._callback = "complete()"
            blocked = self._next_call()
            done = self._call_bool(self.processor.complete, "complete")
            progressed = done or self._emitted()
            self._after_call(progressed, blocked)
            if not done and take_snapshots and progressed and self.outbox.refused_item() is None:
                self.snapshot_point("after a complete() call that returned False")
        self._check_nothing_refused_when_done()
        self._completed = True

    # -------------------------------------------------------------- snapshots

    def snapshot_point(self, when: str) -> None:
        """Saves a snapshot, and restores it into a new instance if the mode says so now."""
        self._snapshots += 1
        entries = self.save_snapshot()
        if self._snapshots % self.mode.restore_every == 0:
            self.log(f"Restoring the snapshot taken {when} into a new instance")
            self.close()
            self.start()
            self.load_snapshot(entries, when)
        else:
            self.log(f"Saved a snapshot {when} without restoring it")

    def save_snapshot(self) -> list[tuple[Any, Any]]:
        """Calls `save_to_snapshot()` until True; the entries as another process would read them."""
        entries: list[tuple[Any, Any]] = []
        keys: set[Any] = set()
        self._callback = "save_to_snapshot()"
        done = False
        while not done:
            done = self._call_bool(self.processor.save_to_snapshot, "save_to_snapshot")
            progressed = done or bool(self.outbox.snapshot_bucket) or self._emitted()
            for entry in self.outbox.snapshot_bucket:
                self._check_new_key(entry[0], keys)
            self.outbox.drain_snapshot_queue(entries)
            self._after_call(progressed)
        self._check_nothing_refused_when_done(snapshot=True)
        return self._serialized(entries)

    def _check_new_key(self, key: Any, keys: set[Any]) -> None:
        """Fails on a key saved twice in one snapshot, which holds one value per key."""
        try:
            duplicate = key in keys
            keys.add(key)
        except TypeError:  # an unhashable key fails later, when restore routes it
            return
        if duplicate:
            raise self._failure(
                f"{self._where()} saved key {show(key)} twice in one snapshot: a snapshot holds "
                "one value per key; if save_to_snapshot() restarts its iteration on every call, "
                "keep the traverser across calls until it returns True"
            )

    def _serialized(self, entries: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
        try:
            return decode_batch(encode_batch(entries))
        except TypeError as error:
            raise self._failure(
                f"{self._where()} saved state that cannot be serialized ({error}); snapshot "
                "state leaves the process, so it must be msgpack scalars/tuples or picklable "
                "objects, and may not rely on references to live objects"
            ) from error

    def load_snapshot(self, entries: Sequence[tuple[Any, Any]], when: str) -> None:
        """Restores `entries` into the current instance, then calls `finish_snapshot_restore()`."""
        self.restores += 1
        self.last_restore = when
        inbox = TestInbox(entries)
        self._callback = "restore_from_snapshot()"
        while not inbox.is_empty():
            before = len(inbox)
            self._call(lambda: self.processor.restore_from_snapshot(inbox))
            self._after_call(len(inbox) < before or self._emitted())
        self._callback = "finish_snapshot_restore()"
        done = False
        while not done:
            done = self._call_bool(
                self.processor.finish_snapshot_restore, "finish_snapshot_restore"
            )
            self._after_call(done or self._emitted())

    # ---------------------------------------------------------- after each call

    def _next_call(self) -> bool:
        """Counts a call against the budget; blocks a cooperative outbox on every other one."""
        self._calls += 1
        if self._calls > self.settings.call_budget:
            raise self._failure(
                f"{self._where()} is call number {self._calls} of this run, which never ends: "
                f"the processor has emitted {sum(map(len, self.outputs))} items and keeps "
                "going without finishing (it may start over after each "
                "snapshot restore, never remove its input item, or never return True; use "
                "disable_complete_call() for a streaming processor)"
            )
        blocked = self.cooperative and self._calls % 2 == 0
        if blocked:
            self.outbox.block()
        return blocked

    def _emitted(self) -> bool:
        return any(self.outbox.buckets)

    def _after_call(self, progressed: bool, blocked: bool = False) -> None:
        """Moves the outbox to the output, then checks progress (not on a blocked call)."""
        self.outbox.unblock()
        self._track_refusal()
        for ordinal, bucket in enumerate(self.outbox.buckets):
            while bucket:
                self._record(ordinal, bucket.popleft())
        if not progressed and not blocked and self.settings.assert_progress:
            self._fail_no_progress()

    def _track_refusal(self) -> None:
        """Remembers which step offered the item the outbox still refuses, for failure messages."""
        item = self.outbox.refused_item()
        if item is None:
            self._refused = None
        elif self._refused is None or self._refused[0] is not item:
            self._refused = (item, self._step())

    def _record(self, ordinal: int, item: Any) -> None:
        if self._completed:
            raise self._failure(
                f"{self._where()} emitted {show(item)} after complete() returned True: True "
                "means the processor is done, so nothing may follow it; return False from "
                "complete() until all output is emitted"
            )
        if isinstance(item, Watermark):
            self._check_watermark_order(ordinal, item)
        self.log(f"Output-{ordinal}: {item!r}")
        self.outputs[ordinal].append(item)
        self.origins[ordinal].append(Origin(self._step(), self.restores, self.last_restore))

    def _check_watermark_order(self, ordinal: int, watermark: Watermark) -> None:
        last = next((w for w in reversed(self.outputs[ordinal]) if isinstance(w, Watermark)), None)
        if last is None or watermark.timestamp > last.timestamp:
            return
        raise self._failure(
            f"{self._where()} put {watermark} on ordinal {ordinal} after {last}: watermarks "
            "must increase; the engine forwards each input watermark itself once "
            "try_process_watermark() returns True, so a processor must not emit it again"
        )

    def _check_nothing_refused_when_done(self, snapshot: bool = False) -> None:
        """Fails when a callback returned True (done) while its last offer is still refused."""
        outbox = self.outbox
        refused = outbox.refused_snapshot_entry() if snapshot else outbox.refused_item()
        if refused is None:
            return
        raise self._failure(
            f"{self._where()} returned True while the outbox still refused {show(refused)}: "
            f"True means done, so that item is lost; {_CONTRACT_FIX}, and return False until "
            "everything is accepted"
        )

    def _note_removed_with_refused_output(self, last_removed: InputItem) -> None:
        note = (
            f"in {self._callback} the outbox refused {show(self.outbox.refused_item())}, yet the "
            f"call emptied the inbox, removing {last_removed} before its output was accepted: "
            "an item must stay in the inbox until all of its output is accepted"
        )
        if note not in self.notes:
            self.notes.append(note)

    # ---------------------------------------------------------------- failures

    def _call(self, fn: Callable[[], T], timed: bool = True) -> T:
        """Runs one callback, timing it and turning contract errors into assertion failures."""
        started = time.perf_counter()
        try:
            result = fn()
        except CallbackResultError as error:
            raise self._callback_result_failure(error) from error
        except ProcessorContractError as error:
            raise self._contract_failure(error) from error
        except Exception as error:
            _add_note(error, f"jetspark TestSupport: raised by {self._where()}")
            raise
        elapsed_ms = (time.perf_counter() - started) * 1000
        timeout = self.settings.cooperative_timeout_ms
        if timed and self.cooperative and 0 < timeout < elapsed_ms:
            raise self._failure(
                f"{self._where()} took {elapsed_ms:.0f} ms, over the cooperative timeout of "
                f"{timeout:g} ms: a cooperative processor shares its thread with others and must "
                "return within about a millisecond; do the work in smaller steps across calls, "
                "or declare is_cooperative() -> False for blocking work"
            )
        return result

    def _call_bool(self, fn: Callable[[], object], callback: str) -> bool:
        """Runs a callback that must return True or False (`_call`); anything else fails."""
        return self._call(lambda: returned_bool(fn(), callback))

    def _callback_result_failure(self, error: CallbackResultError) -> VerificationFailure:
        context = self.context
        return self._failure(
            f"vertex '{context.vertex_name}', processor #{context.global_processor_index}: "
            f"{error} in {self._where()}\nTrue means done and False means call again with the "
            "same input; both engines fail the job with a JobFailedError naming "
            f"{error.callback} rather than call it forever"
        )

    def _contract_failure(self, error: ProcessorContractError) -> VerificationFailure:
        message = f"{self._where()} broke the outbox contract: {error}"
        if self._refused is not None:
            message += f"\nThe refused offer was made in {self._refused[1]}."
        return self._failure(f"{message}\nFix: {_CONTRACT_FIX}.", hints=self.notes)

    def _fail_no_progress(self) -> None:
        did = _NO_PROGRESS.get(self._callback.partition("(")[0], _NO_PROGRESS["complete"])
        raise self._failure(
            f"{self._where()} made no progress: it {did} although the outbox had room, so the "
            "engine would call it again forever; each call must take an item, emit, or return "
            "True (disable_progress_assertion() if this is intended)"
        )

    def _failure(self, message: str, hints: Sequence[str] = ()) -> VerificationFailure:
        return VerificationFailure("\n".join([message, *(f"hint: {h}" for h in hints)]))

    def _where(self) -> str:
        return f"{self._step()} in {self.run_name}"

    def _step(self) -> str:
        """The current callback and the input item it concerns."""
        if self._input is None:
            return f"{self._callback} before any input"
        if self._callback.startswith("process"):
            return f"{self._callback} on {self._input_span(self._input)}"
        if self._callback.startswith(("try_process_watermark", "the engine")):
            return f"{self._callback} on {self._input}"
        return f"{self._callback} after {self._input}"

    def _input_span(self, first: InputItem) -> str:
        """The input items a process() call has reached so far: from `first` to the inbox head."""
        inbox, batch = self._inbox, self._batch
        if inbox is None:
            return str(first)
        last = batch[len(batch) - len(inbox)] if inbox else batch[-1]
        if last is first:
            return str(first)
        return (
            f"input items #{first.position}..#{last.position} "
            f"(ordinal {first.ordinal}: {show(first.item)}..{show(last.item)})"
        )

    def log(self, line: str) -> None:
        """Prints a step of the run unless logging is disabled."""
        if self.settings.log:
            print(line)


_NO_PROGRESS = {
    "process": "took nothing from the inbox and emitted nothing",
    "restore_from_snapshot": "took nothing from the snapshot inbox and emitted nothing",
    "save_to_snapshot": "saved nothing, emitted nothing and returned False",
    "complete": "emitted nothing and returned False",
}
"""What "no progress" means per callback, for the failure message."""


def _add_note(error: BaseException, note: str) -> None:
    """Adds context to a processor's own exception (PEP 678 notes, Python 3.11+)."""
    if hasattr(error, "add_note"):
        error.add_note(note)
