"""Real-time inference: handwritten digits classified as they stream in, the model re-trained
and replaced while the job runs, the predictions committed exactly once.

    events (stream_files_p: events.log) -> parse (map_p) -> classify (map_using_model_p) -> sink
    models (stream_files_p: models.log) -> classify, inbound ordinal 1 (broadcast, distributed)

The data is scikit-learn's digits, 1,797 8x8 images it ships (nothing is downloaded), shuffled
with a fixed seed. Model v1, a softmax regression trained in numpy on the first 200 images, is
in models.log before the job starts; v2, trained on the first 1,000, is saved beside it. The
other 797 images stream in as events: a writer thread appends them to events.log, `--rate` a
second, event n at n x 10 ms of event time, and halfway through appends v2's path to
models.log: every classify processor loads v2 for the events after it, the stream going on.
So that both models predict on a machine of any speed, three moments wait for the job's
metrics: the first event is written once every classify processor has received v1, v2 is
dropped in once an event has reached them too (v1 predicts it), and the last event is written
once every classify processor has received v2 (v2 predicts it). The sink,
`write_file_transactional_p`, publishes the predictions of each snapshot once it is committed:
exactly once, on either engine.

The console shows the accuracy per second of event time as the predictions are committed, and
the run ends with the line `accuracy: 0.xyz`, over the whole stream; `--svg FILE` draws the
accuracy per window. Run it with `python examples/digits_inference.py [--engine local|spark]
[--members N] [--rate EVENTS_PER_SECOND] [--svg FILE] [WORKDIR]`; on Spark it runs in the
execution mode that SparkEngine picks for a job with a processing guarantee. docs/inference.md
explains the pattern.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TextIO

import numpy as np

from jetspark.core import (
    DAG,
    DirectorySnapshotStore,
    Job,
    JobCancelledError,
    JobConfig,
    ProcessingGuarantee,
)
from jetspark.core.cli import EngineSession, add_engine_arguments
from jetspark.edges import between, from_
from jetspark.processors import (
    map_p,
    map_using_model_p,
    stream_files_p,
    write_file_transactional_p,
)

SEED = 27
"""Shuffles the digits: which images train the models and which stream in."""
V1_IMAGES, V1_EPOCHS = 200, 100
V2_IMAGES, V2_EPOCHS = 1_000, 1_000
LEARNING_RATE, L2 = 0.5, 1e-3
EVENT_SPACING_MILLIS = 10
WINDOW_MILLIS = 1_000
"""Event time per accuracy line: 100 events."""
EVENTS_FILE, MODELS_FILE = "events.log", "models.log"
POLL_SECONDS = 0.02
SNAPSHOT_INTERVAL_MILLIS = 500
PIXELS = 64

Event = tuple[int, int, bytes]
"""(event number, true label, the image's 64 pixels of 0-16): a plain tuple, so that events
held in a snapshot restore anywhere (a class of this script would not, docs/fault_tolerance.md)."""
Prediction = tuple[int, int, int, str]
"""(event number, true label, predicted label, model version)."""


# ------------------------------------------------------------------------- the data


class Digits(NamedTuple):
    """The digits in the seeded order: `pixels[i]` (64 values of 0-16) shows `labels[i]`."""

    pixels: np.ndarray
    labels: np.ndarray

    @staticmethod
    def shuffled(seed: int = SEED) -> Digits:
        """scikit-learn's digits (imported here: only the driver needs scikit-learn)."""
        try:
            from sklearn.datasets import load_digits
        except ImportError as error:
            raise SystemExit(
                "examples/digits_inference.py reads scikit-learn's digits: pip install "
                "'jetspark[ml]' (or scikit-learn)"
            ) from error

        digits = load_digits()
        order = np.random.default_rng(seed).permutation(len(digits.target))
        return Digits(digits.data[order].astype(np.uint8), digits.target[order])

    def stream(self) -> list[Event]:
        """The images no model is trained on, as events."""
        return [
            (n, int(label), pixels.tobytes())
            for n, (pixels, label) in enumerate(
                zip(self.pixels[V2_IMAGES:], self.labels[V2_IMAGES:], strict=True)
            )
        ]


def features(pixels: np.ndarray) -> np.ndarray:
    """Pixels (0-16, one row per image) scaled to 0-1."""
    return pixels.astype(np.float32) / 16.0


# ------------------------------------------------------------------------ the model


class SoftmaxModel(NamedTuple):
    """Multinomial logistic regression: `argmax(x @ weights + bias)` over the ten digits."""

    version: str
    weights: np.ndarray
    bias: np.ndarray

    def predict(self, pixels: np.ndarray) -> np.ndarray:
        """The predicted digit of each row of `pixels`, in one matrix product."""
        return np.argmax(features(pixels) @ self.weights + self.bias, axis=1)

    def save(self, directory: Path) -> str:
        """Writes the model to `directory`/<version>.npz; returns the path, its reference."""
        path = directory / f"{self.version}.npz"
        np.savez(path, version=self.version, weights=self.weights, bias=self.bias)
        return str(path)


def train(version: str, digits: Digits, images: int, epochs: int) -> SoftmaxModel:
    """A SoftmaxModel fitted to the first `images` digits by full-batch gradient descent on
    the cross-entropy with an L2 penalty (deterministic: it starts from zeros)."""
    x, labels = features(digits.pixels[:images]), digits.labels[:images]
    targets = np.eye(10, dtype=np.float32)[labels]
    weights, bias = np.zeros((PIXELS, 10), np.float32), np.zeros(10, np.float32)
    for _ in range(epochs):
        scores = x @ weights + bias
        scores -= scores.max(axis=1, keepdims=True)
        probabilities = np.exp(scores)
        probabilities /= probabilities.sum(axis=1, keepdims=True)
        error = (probabilities - targets) / images
        weights -= LEARNING_RATE * (x.T @ error + L2 * weights)
        bias -= LEARNING_RATE * error.sum(axis=0)
    return SoftmaxModel(version, weights, bias)


def load_model(reference: str) -> SoftmaxModel:
    """The model a reference (a path in models.log) names."""
    with np.load(reference) as saved:
        return SoftmaxModel(str(saved["version"]), saved["weights"], saved["bias"])


def predict_batch(model: SoftmaxModel, events: list[Event]) -> list[Prediction]:
    """One prediction per event, the whole batch in one matrix product."""
    pixels = np.frombuffer(b"".join(e[2] for e in events), np.uint8).reshape(-1, PIXELS)
    predicted = model.predict(pixels).tolist()
    return [
        (n, label, p, model.version) for (n, label, _), p in zip(events, predicted, strict=True)
    ]


# -------------------------------------------------------------------------- the job


def event_line(event: Event) -> str:
    """An event as a line of events.log: its number, label and pixels."""
    n, label, pixels = event
    return " ".join(map(str, (n, label, *pixels)))


def parse_event(line: str) -> Event:
    """The inverse of `event_line`."""
    n, label, *pixels = map(int, line.split())
    return n, label, bytes(pixels)


def prediction_line(prediction: Prediction) -> str:
    """A prediction as a line of the sink's files."""
    return " ".join(map(str, prediction))


def parse_prediction(line: str) -> Prediction:
    """The inverse of `prediction_line`."""
    n, label, predicted, version = line.split()
    return int(n), int(label), int(predicted), version


def build_dag(events_dir: str, models_dir: str, output_dir: str) -> DAG:
    """The inference DAG: the events appended to events.log, classified by the model of the
    latest path appended to models.log, into transactional files in `output_dir`."""
    dag = DAG("digits-inference")
    # one file, one reader in the whole job (shared_file_system): its lines spread over parse
    events = dag.new_vertex(
        "events",
        stream_files_p(events_dir, EVENTS_FILE, shared_file_system=True),
        local_parallelism=1,
    )
    parse = dag.new_vertex("parse", map_p(parse_event))
    models = dag.new_vertex(
        "models",
        stream_files_p(models_dir, MODELS_FILE, shared_file_system=True),
        local_parallelism=1,
    )
    classify = dag.new_vertex("classify", map_using_model_p(load_model, predict_batch))
    sink = dag.new_vertex("sink", write_file_transactional_p(output_dir, prediction_line))
    dag.edge(between(events, parse).distributed())
    dag.edge(between(parse, classify).isolated())
    dag.edge(from_(models).to(classify, 1).distributed().broadcast())
    dag.edge(between(classify, sink).isolated())
    return dag


def append_line(path: Path, line: str) -> None:
    """Appends one whole line to `path` at once, as a producer of the stream would."""
    with open(path, "a", encoding="utf-8") as file:
        file.write(line + "\n")


class EventWriter:
    """Appends the events to events.log from a thread of its own, `rate` a second, in step
    with the job's deployments (the module docstring): it starts once every classify processor
    has v1, drops v2 in (`drop_v2()`) halfway once an event reached them, and writes the last
    event once every classify processor has v2."""

    def __init__(
        self,
        path: Path,
        events: Sequence[Event],
        rate: float,
        job: Job,
        drop_v2: Callable[[], None],
    ) -> None:
        self.path, self.events, self.rate = path, events, rate
        self.job, self.drop_v2 = job, drop_v2
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._write, name="event-writer", daemon=True)

    def __enter__(self) -> EventWriter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _write(self) -> None:
        count, half = len(self.events), len(self.events) // 2
        with open(self.path, "a", encoding="utf-8") as file:
            if not self._wait_for(lambda: references_received(self.job) >= 1):
                return
            self._paced(file, 0, half)
            if not self._wait_for(lambda: events_received(self.job) >= 1):
                return
            self.drop_v2()
            self._paced(file, half, count - 1)
            if self._wait_for(lambda: references_received(self.job) >= 2):
                self._paced(file, count - 1, count)

    def _wait_for(self, condition: Callable[[], bool]) -> bool:
        """Waits until `condition()`; False if stopped first."""
        while not condition():
            if self._stop.wait(POLL_SECONDS):
                return False
        return True

    def _paced(self, file: TextIO, start: int, end: int) -> None:
        """Writes events[start:end], `rate` a second from now, until done or stopped."""
        written, started = start, time.monotonic()
        while written < end and not self._stop.wait(POLL_SECONDS):
            due = min(end, start + int((time.monotonic() - started) * self.rate))
            file.write("".join(event_line(e) + "\n" for e in self.events[written:due]))
            file.flush()
            written = due


class CommittedPredictions:
    """The predictions the sink has published, read file by file (a published file never
    changes)."""

    def __init__(self, output_dir: Path) -> None:
        self.output_dir = output_dir
        self.predictions: list[Prediction] = []
        self._read: set[Path] = set()

    def refresh(self) -> list[Prediction]:
        """Reads the files published since the last call; returns their predictions."""
        new: list[Prediction] = []
        for path in sorted(self.output_dir.glob("part-*")):
            if path not in self._read:
                self._read.add(path)
                new += [parse_prediction(line) for line in path.read_text().splitlines()]
        self.predictions += new
        return new


class Window:
    """One window of event time: how many events it holds, and its committed predictions."""

    def __init__(self, index: int, expected: int) -> None:
        self.index, self.expected = index, expected
        self.correct = self.committed = 0
        self.versions: Counter[str] = Counter()

    def add(self, prediction: Prediction) -> None:
        """Counts a committed prediction of one of the window's events."""
        _, label, predicted, version = prediction
        self.committed += 1
        self.correct += label == predicted
        self.versions[version] += 1

    @property
    def accuracy(self) -> float:
        return self.correct / self.committed

    def line(self) -> str:
        """`  1.0-2.0 s  accuracy 0.910  (100 events, v1)`, or `(..., v1 40, v2 60)`."""
        models = ", ".join(
            f"{version} {n}" if len(self.versions) > 1 else version
            for version, n in sorted(self.versions.items())
        )
        start = self.index * WINDOW_MILLIS / 1000
        end = start + WINDOW_MILLIS / 1000
        return (
            f"{start:5.1f}-{end:.1f} s  accuracy {self.accuracy:.3f}  "
            f"({self.committed} events, {models})"
        )


def window_of(n: int) -> int:
    """The window of event time of event n."""
    return n * EVENT_SPACING_MILLIS // WINDOW_MILLIS


def windows_of(count: int) -> list[Window]:
    """The windows of `count` events, each with the number of events it holds."""
    sizes = Counter(window_of(n) for n in range(count))
    return [Window(index, sizes[index]) for index in range(len(sizes))]


def references_received(job: Job) -> int:
    """How many model references every classify processor has received (job metrics)."""
    processors = job.metrics.of_vertex("classify")
    return min((p.received_count.get(1, 0) for p in processors), default=0)


def events_received(job: Job) -> int:
    """How many events the classify processors have received (job metrics)."""
    return sum(p.received_count.get(0, 0) for p in job.metrics.of_vertex("classify"))


class Outcome(NamedTuple):
    """What a run committed."""

    predictions: list[Prediction]
    windows: list[Window]
    output_dir: Path
    execution_mode: str

    @property
    def accuracy(self) -> float:
        return sum(label == predicted for _, label, predicted, _ in self.predictions) / len(
            self.predictions
        )

    def by_version(self) -> dict[str, list[Prediction]]:
        versions: dict[str, list[Prediction]] = {}
        for prediction in self.predictions:
            versions.setdefault(prediction[3], []).append(prediction)
        return versions


def run(args: argparse.Namespace, spark: Any = None) -> Outcome:
    """Trains the models, runs the job until every event's prediction is committed, printing
    the accuracy per window as it goes, then cancels it."""
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="digits-inference-"))
    events_dir, models_dir, output_dir = (workdir / name for name in ("events", "models", "out"))
    for directory in (events_dir, models_dir, output_dir):
        directory.mkdir(parents=True, exist_ok=False)
    digits = Digits.shuffled()
    v1 = train("v1", digits, V1_IMAGES, V1_EPOCHS).save(models_dir)
    v2 = train("v2", digits, V2_IMAGES, V2_EPOCHS).save(models_dir)
    events = digits.stream()
    append_line(models_dir / MODELS_FILE, v1)
    config = JobConfig(
        name="digits-inference",
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=args.snapshot_interval,
    )
    windows = windows_of(len(events))
    committed = CommittedPredictions(output_dir)
    with EngineSession.of(args, spark) as session:
        print(
            f"classifying {len(events)} digits streamed at {args.rate:g} a second on "
            f"{session.description}, exactly-once into {output_dir}; model v1 (trained on "
            f"{V1_IMAGES} images) from the start",
            flush=True,
        )
        job = session.engine.new_job(
            build_dag(str(events_dir), str(models_dir), str(output_dir)),
            config,
            snapshot_store=DirectorySnapshotStore(str(workdir / "snapshots")),
        )

        def drop_v2() -> None:
            append_line(models_dir / MODELS_FILE, v2)
            print(
                f"v2 (trained on {V2_IMAGES:,} images) dropped into {MODELS_FILE} after "
                f"{len(events) // 2} events",
                flush=True,
            )

        with EventWriter(events_dir / EVENTS_FILE, events, args.rate, job, drop_v2):
            follow(job, committed, windows, len(events))
        job.cancel()
        with contextlib.suppress(JobCancelledError):
            job.join()
    return Outcome(committed.predictions, windows, output_dir, job.metrics.execution_mode)


def follow(job: Job, committed: CommittedPredictions, windows: list[Window], count: int) -> None:
    """Prints each window's accuracy once all its predictions are committed, until all `count`
    are; raises the job's failure."""
    printed = 0
    while len(committed.predictions) < count:
        with contextlib.suppress(TimeoutError):
            job.join(timeout=POLL_SECONDS)
            raise RuntimeError(f"{job.name}, an unbounded job, completed")
        for prediction in committed.refresh():
            windows[window_of(prediction[0])].add(prediction)
        while printed < len(windows) and windows[printed].committed == windows[printed].expected:
            print(windows[printed].line(), flush=True)
            printed += 1


def check(outcome: Outcome, count: int) -> list[str]:
    """What is wrong with the committed predictions: events committed twice or never."""
    seen = Counter(n for n, *_ in outcome.predictions)
    problems = [f"event {n} committed {times} times" for n, times in seen.items() if times > 1]
    return problems + [f"event {n} never committed" for n in range(count) if n not in seen]


def summary(outcome: Outcome) -> str:
    """What each model predicted, and that every event was committed once."""
    lines = []
    for version, predictions in sorted(outcome.by_version().items()):
        right = sum(label == predicted for _, label, predicted, _ in predictions)
        lines.append(
            f"{version} predicted {len(predictions)} events, {right / len(predictions):.3f} of "
            "them right"
        )
    lines.append(
        f"each of the {len(outcome.predictions)} events committed exactly once, in "
        f"{outcome.output_dir} (execution mode: {outcome.execution_mode})"
    )
    return "\n".join(lines)


def accuracy_svg(windows: Sequence[Window], switch_at: float | None) -> str:
    """A line chart of the accuracy per window of event time (SVG), with a mark at `switch_at`
    (seconds of event time): the first event v2 predicted."""
    width, height, left, bottom, top = 560, 300, 50, 40, 20
    low, high = 0.8, 1.0
    span = max(len(windows), 1)

    def x(window: float) -> float:
        """Where a point `window` windows into the event time is drawn."""
        return left + (width - left - 20) * window / span

    def y(accuracy: float) -> float:
        clipped = min(max(accuracy, low), high)
        return top + (height - top - bottom) * (high - clipped) / (high - low)

    points = " ".join(f"{x(w.index + 0.5):.1f},{y(w.accuracy):.1f}" for w in windows)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="{top - 6}">accuracy per second of event time</text>',
    ]
    for tick in (0.8, 0.85, 0.9, 0.95, 1.0):
        parts.append(
            f'<line x1="{left}" x2="{width - 20}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" '
            'stroke="#ddd"/>'
            f'<text x="{left - 8}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick:.2f}</text>'
        )
    for w in windows:
        parts.append(
            f'<text x="{x(w.index + 0.5):.1f}" y="{height - bottom + 16}" text-anchor="middle">'
            f"{w.index}-{w.index + 1}</text>"
        )
    parts.append(
        f'<text x="{(left + width) / 2}" y="{height - 6}" text-anchor="middle">'
        "event time (s)</text>"
    )
    if switch_at is not None:
        at = x(switch_at * 1000 / WINDOW_MILLIS)
        parts.append(
            f'<line x1="{at:.1f}" x2="{at:.1f}" y1="{top}" y2="{height - bottom}" '
            'stroke="#c33" stroke-dasharray="4 3"/>'
            f'<text x="{at + 4:.1f}" y="{top + 12}" fill="#c33">v2 deployed</text>'
        )
    parts.append(f'<polyline points="{points}" fill="none" stroke="#24c" stroke-width="2"/>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "workdir", nargs="?", metavar="WORKDIR", help="a new directory for the files"
    )
    add_engine_arguments(parser, default_engine="local")
    parser.add_argument(
        "--rate", type=float, default=100.0, metavar="N", help="events a second (default 100)"
    )
    parser.add_argument(
        "--snapshot-interval",
        type=int,
        default=SNAPSHOT_INTERVAL_MILLIS,
        metavar="MILLIS",
        help=f"milliseconds between snapshots (default {SNAPSHOT_INTERVAL_MILLIS})",
    )
    parser.add_argument("--svg", metavar="FILE", help="draw the accuracy per window to FILE")
    parser.set_defaults(members=2)
    return parser


def main(argv: Sequence[str] | None = None, spark: Any = None) -> Outcome:
    """Runs the example, prints the accuracy, checks that each event was committed once."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.rate > 0 or args.snapshot_interval < 1:
        parser.error("--rate and --snapshot-interval must be above 0")
    outcome = run(args, spark)
    problems = check(outcome, sum(w.expected for w in outcome.windows))
    if problems:
        raise SystemExit("not exactly once:\n  " + "\n  ".join(problems[:20]))
    print(summary(outcome))
    if args.svg:
        by_v2 = [n for n, *_, version in outcome.predictions if version == "v2"]
        switch_at = min(by_v2) * EVENT_SPACING_MILLIS / 1000 if by_v2 else None
        Path(args.svg).write_text(accuracy_svg(outcome.windows, switch_at))
        print(f"accuracy per window drawn in {args.svg}")
    print(f"accuracy: {outcome.accuracy:.3f}", flush=True)  # over the whole stream, last
    return outcome


if __name__ == "__main__":
    main()
