"""examples/digits_inference.py on both engines: digits classified as they stream in, model v2
dropped into the model stream mid-run, every prediction committed exactly once.

The example keeps in step with the job's metrics (not the clock) where it matters, so both
models predict on a machine of any speed; the tests assert on what was committed."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from test_processors_examples import load

pytest.importorskip("sklearn")
digits = load("digits_inference")

EVENTS = 1_797 - digits.V2_IMAGES


def committed(workdir: Path) -> list[tuple[int, int, int, str]]:
    """The predictions in the sink's published files, read here rather than by the example."""
    return [
        digits.parse_prediction(line)
        for path in sorted((workdir / "out").glob("part-*"))
        for line in path.read_text().splitlines()
    ]


def check_run(workdir: Path, printed: str) -> None:
    predictions = committed(workdir)
    assert sorted(n for n, *_ in predictions) == list(range(EVENTS))  # each once
    by_version = {v: [p for p in predictions if p[3] == v] for v in ("v1", "v2")}
    assert by_version["v1"] and by_version["v2"]
    assert {p[3] for p in predictions} == {"v1", "v2"}
    accuracy = float(re.fullmatch(r"accuracy: (0\.\d{3})", printed.splitlines()[-1])[1])
    assert accuracy >= 0.85
    right = sum(label == predicted for _, label, predicted, _ in predictions)
    assert accuracy == round(right / EVENTS, 3)
    windows = re.findall(r"^\s+\d+\.\d-\d+\.\d s  accuracy 0\.\d{3}  \((\d+) events", printed, re.M)
    assert sum(map(int, windows)) == EVENTS
    assert "dropped into models.log" in printed


def arguments(workdir: Path, *extra: str) -> list[str]:
    return [str(workdir), "--members", "2", "--rate", "400", "--snapshot-interval", "200", *extra]


def test_the_example_on_the_local_engine(tmp_path, capsys):
    svg = tmp_path / "accuracy.svg"
    workdir = tmp_path / "run"
    digits.main(arguments(workdir, "--engine", "local", "--svg", str(svg)))
    check_run(workdir, capsys.readouterr().out)
    drawing = svg.read_text()
    assert drawing.startswith("<svg") and "v2 deployed" in drawing
    points = re.search(r'<polyline points="([^"]+)"', drawing)[1].split()
    assert len(points) == len(digits.windows_of(EVENTS))


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_the_example_on_spark(tmp_path, capsys, spark_engine):
    workdir = tmp_path / "run"
    digits.main(arguments(workdir, "--engine", "spark"), spark=spark_engine.context)
    check_run(workdir, capsys.readouterr().out)


def test_v2_learned_from_more_images_is_the_better_model():
    data = digits.Digits.shuffled()
    pixels, labels = data.pixels[digits.V2_IMAGES :], data.labels[digits.V2_IMAGES :]
    v1 = digits.train("v1", data, digits.V1_IMAGES, digits.V1_EPOCHS)
    v2 = digits.train("v2", data, digits.V2_IMAGES, digits.V2_EPOCHS)
    v1_accuracy = float(np.mean(v1.predict(pixels) == labels))
    v2_accuracy = float(np.mean(v2.predict(pixels) == labels))
    assert 0.85 <= v1_accuracy < v2_accuracy


def test_a_saved_model_loads_and_predicts_a_batch_like_the_original(tmp_path):
    data = digits.Digits.shuffled()
    model = digits.train("v1", data, 50, 10)
    loaded = digits.load_model(model.save(tmp_path))
    events = data.stream()[:5]
    assert [digits.parse_event(digits.event_line(e)) for e in events] == events
    predictions = digits.predict_batch(loaded, events)
    expected = model.predict(np.stack([np.frombuffer(e[2], np.uint8) for e in events])).tolist()
    labels = [(n, label) for n, label, _ in events]
    assert predictions == [(*known, p, "v1") for known, p in zip(labels, expected, strict=True)]


@pytest.mark.parametrize("bad", [["--rate", "0"], ["--snapshot-interval", "0"]])
def test_bad_options_exit_2(bad):
    with pytest.raises(SystemExit) as exit_:
        digits.main(bad)
    assert exit_.value.code == 2
