"""TestSupport: the fluent builder that verifies a processor (manual §8.8.2), and its runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from jetspark.core.test_support.boxes import TestProcessorContext
from jetspark.core.test_support.driver import Driver, Settings, VerificationFailure
from jetspark.core.test_support.inputs import InputItem, mix_inputs
from jetspark.core.test_support.modes import DEFAULT_MODES, TestMode
from jetspark.core.test_support.report import (
    OutputChecker,
    exact_equality,
    mismatch_message,
    same_items_any_order,
)
from jetspark.core.test_support.rescale import KeyFn, Rescale, RescaledRun
from jetspark.core.test_support.source import ProcessorSource


class TestSupport:
    """Verifies a processor: feeds it input in several modes and asserts its output every time.

    Each run: `init()`; a snapshot before any input and whenever the inbox drains (restored into a
    new instance as the mode says); `process()` with an inbox of one item or of all items;
    watermarks in the input go to `try_process_watermark()` and, once it returns True, are
    forwarded to every output ordinal as the engine does; `complete()` until True; a final
    snapshot. Cooperative processors get a 1-capacity outbox that is full on every other call.
    """

    __test__ = False

    SAME_ITEMS_ANY_ORDER: ClassVar[OutputChecker] = staticmethod(same_items_any_order)
    """An output checker accepting the expected items in any order, each as many times."""

    def __init__(self, source: ProcessorSource) -> None:
        self._source = source
        self._inputs: list[list[Any]] = [[]]
        self._priorities: list[int] = [0]
        self._assert_progress = True
        self._snapshots = True
        self._log = True
        self._call_complete = True
        self._timeout_ms = 1000.0
        self._checker: OutputChecker = exact_equality
        self._modes: tuple[TestMode, ...] = DEFAULT_MODES
        self._context = TestProcessorContext(vertex_name=source.vertex_name)
        self._rescales: list[Rescale] = []

    @staticmethod
    def verify_processor(supplier_or_processor: Any) -> TestSupport:
        """Starts a verification of a Processor class/factory, (meta-)supplier or instance."""
        return TestSupport(ProcessorSource(supplier_or_processor, "test"))

    # ---------------------------------------------------------------- options

    def input(self, items: Sequence[Any]) -> TestSupport:
        """The items of inbound ordinal 0; Watermark items go to `try_process_watermark()`."""
        return self.inputs([items])

    def inputs(
        self, inputs: Sequence[Sequence[Any]], priorities: Sequence[int] | None = None
    ) -> TestSupport:
        """One list per inbound ordinal, delivered by priority (lower first), then round-robin."""
        priorities = [0] * len(inputs) if priorities is None else list(priorities)
        if len(priorities) != len(inputs):
            raise ValueError(f"{len(inputs)} inputs but {len(priorities)} priorities")
        self._inputs = [list(items) for items in inputs]
        self._priorities = priorities
        return self

    def disable_complete_call(self) -> TestSupport:
        """Never calls `complete()`: for streaming processors whose complete() never ends."""
        self._call_complete = False
        return self

    def disable_logging(self) -> TestSupport:
        """Stops printing the input, output and snapshot steps to stdout."""
        self._log = False
        return self

    def disable_progress_assertion(self) -> TestSupport:
        """Allows callbacks that neither take input, emit, nor return True."""
        self._assert_progress = False
        return self

    def disable_snapshots(self) -> TestSupport:
        """Runs only the modes without snapshots (for processors without snapshot support)."""
        self._snapshots = False
        return self

    def cooperative_timeout(self, timeout_ms: float) -> TestSupport:
        """Fails a cooperative processor's callback that runs longer; 0 disables (default 1000)."""
        self._timeout_ms = timeout_ms
        return self

    def output_checker(self, checker: OutputChecker) -> TestSupport:
        """`(expected, actual) -> bool` per ordinal; the default is exact, ordered equality."""
        self._checker = checker
        return self

    def local_processor_index(self, index: int) -> TestSupport:
        """The processor's index on its member, as its Context reports it."""
        self._context.local_processor_index = index
        return self

    def global_processor_index(self, index: int) -> TestSupport:
        """The processor's index among all of the vertex's processors."""
        self._context.global_processor_index = index
        return self

    def local_parallelism(self, count: int) -> TestSupport:
        """The number of the vertex's processors per member."""
        self._context.local_parallelism = count
        return self

    def total_parallelism(self, count: int) -> TestSupport:
        """The number of the vertex's processors in the whole job."""
        self._context.total_parallelism = count
        return self

    def modes(self, *modes: TestMode) -> TestSupport:
        """Runs only these modes, e.g. `modes(ONE_ITEM)` for a processor with external state."""
        if not modes:
            raise ValueError("give at least one TestMode")
        self._modes = modes
        return self

    def restore_rescaled(
        self,
        from_parallelism: int,
        to_parallelism: int,
        key_fn: KeyFn | Sequence[KeyFn | None],
    ) -> TestSupport:
        """Also restores a snapshot of N instances into M, routing input by `key_fn`.

        `key_fn` gives the partitioning key of an input item; a sequence gives one per inbound
        ordinal, None marking a broadcast edge. Snapshot entries are routed by their key.
        """
        self._rescales.append(Rescale(from_parallelism, to_parallelism, key_fn))
        return self

    # ------------------------------------------------------------------- runs

    def expect_output(self, expected: Sequence[Any]) -> None:
        """Runs the verification expecting `expected` on outbound ordinal 0."""
        __tracebackhide__ = True  # pytest shows the test's line and the message, not ours
        self._run([list(expected)])

    def outputs(self, expected: Sequence[Sequence[Any]]) -> None:
        """Runs the verification expecting one list per outbound ordinal."""
        __tracebackhide__ = True
        self._run([list(items) for items in expected])

    def verify(self) -> None:
        """Runs the verification of a processor without outbound edges (a sink)."""
        __tracebackhide__ = True
        self._run([])

    def _run(self, expected: list[list[Any]]) -> None:
        """Runs every run; a failure is raised without the harness's own stack frames."""
        __tracebackhide__ = True
        try:
            self._run_all(expected)
        except VerificationFailure as failure:
            raise failure.with_traceback(None)  # noqa: B904 - the same exception, re-raised

    def _run_all(self, expected: list[list[Any]]) -> None:
        mixed = mix_inputs(self._inputs, self._priorities)
        modes = self._chosen_modes(mixed)
        members, member_index = self._shape()
        budget = 10_000 + 10 * (len(mixed) + sum(len(items) for items in expected))
        settings = Settings(self._assert_progress, self._timeout_ms, self._log, budget)
        passed_without_snapshots = False
        with self._source.session(members, self._context.local_parallelism) as new_processor:
            for mode in modes:
                driver = Driver(
                    lambda: new_processor(member_index),
                    self._context,
                    settings,
                    mode,
                    len(expected),
                    f"mode [{mode}]",
                )
                self._run_mode(driver, mixed)
                self._check(driver, expected, passed_without_snapshots)
                passed_without_snapshots |= not mode.snapshots
        for rescale in self._rescales:
            key_fns = rescale.key_fns(len(self._inputs))
            run = RescaledRun(
                rescale,
                key_fns,
                self._source,
                settings,
                expected,
                self._call_complete,
                self._checker,
            )
            run.verify(mixed)

    def _run_mode(self, driver: Driver, mixed: Sequence[InputItem]) -> None:
        driver.log(f"### Running the test, {driver.run_name}")
        snapshots = driver.mode.snapshots
        driver.start()
        driver.feed(mixed, take_snapshots=snapshots)
        if self._call_complete:
            driver.complete(take_snapshots=snapshots and not mixed)
            if snapshots:
                driver.snapshot_point("after complete() returned True")
        driver.close()

    def _chosen_modes(self, mixed: Sequence[InputItem]) -> list[TestMode]:
        modes = [m for m in self._modes if self._snapshots or not m.snapshots]
        if not modes:
            raise ValueError("every chosen mode takes snapshots, but snapshots are disabled")
        if self._rescales and not self._snapshots:
            raise ValueError("restore_rescaled() needs snapshots, but they are disabled")
        if mixed:
            return modes
        one_per_snapshot_setting: dict[int, TestMode] = {}  # without input, inbox size is moot
        for mode in modes:
            one_per_snapshot_setting.setdefault(mode.restore_every, mode)
        return list(one_per_snapshot_setting.values())

    def _shape(self) -> tuple[int, int]:
        """Member count and member index implied by the parallelism options, validated."""
        c = self._context
        if c.total_parallelism < 1 or c.local_parallelism < 1:
            raise ValueError("parallelism must be >= 1")
        if c.total_parallelism % c.local_parallelism:
            raise ValueError(
                f"total_parallelism {c.total_parallelism} is not a multiple of "
                f"local_parallelism {c.local_parallelism}"
            )
        if not 0 <= c.global_processor_index < c.total_parallelism:
            raise ValueError(f"global_processor_index must be in [0, {c.total_parallelism})")
        if not 0 <= c.local_processor_index < c.local_parallelism:
            raise ValueError(f"local_processor_index must be in [0, {c.local_parallelism})")
        c.member_count = c.total_parallelism // c.local_parallelism
        c.member_index = c.global_processor_index // c.local_parallelism
        return c.member_count, c.member_index

    def _check(self, driver: Driver, expected: list[list[Any]], passed_plain: bool) -> None:
        for ordinal, wanted in enumerate(expected):
            actual = driver.outputs[ordinal]
            if self._checker(wanted, actual):
                continue
            hints = list(driver.notes)
            if driver.restores and passed_plain:
                hints.append(
                    "the output was right with snapshots off: state is lost or doubled across "
                    "save_to_snapshot() / restore_from_snapshot() (save every piece of state, "
                    "restore all of it, and rebuild the rest in finish_snapshot_restore())"
                )
            headline = f"processor output on ordinal {ordinal} does not match in {driver.run_name}"
            any_order = self._checker is same_items_any_order
            message = mismatch_message(
                headline, wanted, actual, driver.origins[ordinal], any_order, hints
            )
            raise VerificationFailure(message)
