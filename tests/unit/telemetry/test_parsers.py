from __future__ import annotations

from runner.manifest.model import MetricsSpec
from runner.telemetry.parsers import LogMetricParser
from runner.telemetry.point import MetricPoint, read_series
from runner.telemetry.recorder import MetricsRecorder
from runner.telemetry.report import curves
from runner.telemetry.summary import MAX_METRICS, SAMPLES

KERAS3_TTY = (
    b"Epoch 1/2\n"
    b"\r\x1b[1m1/6\x1b[0m \x1b[32m\xe2\x94\x81\x1b[0m \x1b[1m1s\x1b[0m 334ms/step - accuracy: 0.5312 - loss: 0.6679"
    b"\r\x1b[1m6/6\x1b[0m \x1b[32m\xe2\x94\x81\x1b[0m \x1b[1m0s\x1b[0m 23ms/step - accuracy: 0.5573 - loss: 0.6577"
    b" - val_accuracy: 0.5938 - val_loss: 0.6710\n"
    b"Epoch 2/2\n"
    b"6/6 - 0s - 3ms/step - accuracy: 0.6000 - loss: 0.6000 - val_accuracy: 0.6100 - val_loss: 6.1e-01\n"
)
KERAS2 = b"Epoch 1/1\n32/32 [==============================] - 1s 5ms/step - loss: 0.4962 - accuracy: 0.8573\n"


def parse(chunks, regexes=None):
    points = []
    parser = LogMetricParser(regexes or {}, points.extend)
    for chunk in chunks:
        parser.feed(chunk)
    return [(p.name, p.value, p.step) for p in points]


def test_keras3_progress_and_epoch_lines():
    assert parse([KERAS3_TTY]) == [
        ("accuracy", 0.5573, 1),
        ("loss", 0.6577, 1),
        ("val_accuracy", 0.5938, 1),
        ("val_loss", 0.6710, 1),
        ("accuracy", 0.6, 2),
        ("loss", 0.6, 2),
        ("val_accuracy", 0.61, 2),
        ("val_loss", 0.61, 2),
    ]


def test_keras2_lines():
    assert parse([KERAS2]) == [("loss", 0.4962, 1), ("accuracy", 0.8573, 1)]


def test_evaluate_line_after_the_epoch_summary_is_not_a_training_metric():
    chunk = b"Epoch 1/1\n4/4 - 0s - accuracy: 0.9 - loss: 0.1\n2/2 - 0s - accuracy: 0.5 - loss: 0.7\n"
    assert parse([chunk]) == [("accuracy", 0.9, 1), ("loss", 0.1, 1)]


def test_evaluate_only_script_is_recorded():
    assert parse([b"10/10 - 0s 2ms/step - accuracy: 0.97 - loss: 0.1\n"]) == [
        ("accuracy", 0.97, None),
        ("loss", 0.1, None),
    ]


def test_ordinary_lines_are_not_metrics():
    assert parse([b"loading 3/4 shards - please wait\nlr: 0.1\nEpoch time 3/4\n"]) == []


def test_regex_with_group_and_counter_steps():
    chunks = [b"iteration done acc=0.5\n", b"noise\nacc=0.75 more\n"]
    assert parse(chunks, {"acc": r"acc=([0-9.]+)"}) == [("acc", 0.5, 0), ("acc", 0.75, 1)]


def test_regex_named_step_and_value():
    assert parse([b"step 7: loss 0.25\n"], {"loss": r"step (?P<step>\d+): loss (?P<value>[0-9.]+)"}) == [
        ("loss", 0.25, 7)
    ]


def test_regex_sees_one_line_at_a_time():
    # `\s+` could cross a newline if the chunk were searched as one string
    assert parse([b"acc:\n0.5\nacc: 0.9\n"], {"acc": r"acc:\s+([0-9.]+)"}) == [("acc", 0.9, 0)]


def test_regex_uses_the_keras_epoch_as_step():
    chunk = b"Epoch 3/3\n1/1 - 0s - loss: 0.2\ntest accuracy: 0.97\n"
    assert ("test_accuracy", 0.97, 3) in parse([chunk], {"test_accuracy": r"test accuracy: ([0-9.]+)"})


def test_regex_ignores_non_numbers():
    assert parse([b"acc=abc\n"], {"acc": r"acc=(\S+)"}) == []


def test_the_recorder_keeps_bounded_state_whatever_the_number_of_points(tmp_path):
    """60k points of 3 metrics: all on disk in arrival order, in memory only the summary and at
    most SAMPLES (+ the latest) per series; close() reads nothing back."""
    shown = []
    recorder = MetricsRecorder(tmp_path / "metrics.jsonl", MetricsSpec(), shown.append)
    total = 60_000
    for start in range(0, total, 1000):
        recorder.record(
            [
                MetricPoint(("loss", "accuracy", "lr")[i % 3], 1.0 / (i + 1), i, float(i), "log")
                for i in range(start, start + 1000)
            ]
        )
    (tmp_path / "metrics.jsonl").rename(tmp_path / "moved.jsonl")  # close() must not need it
    samples = recorder.close()
    assert len(samples) <= 3 * (SAMPLES + 1)
    for name in ("loss", "accuracy", "lr"):
        steps = [p.step for p in samples if p.name == name]
        assert steps == sorted(steps) and steps[0] < 10 and steps[-1] >= total - 3  # spread from first to last
        assert SAMPLES // 2 <= len(steps) <= SAMPLES + 1
    assert len(recorder.unshown) == 0 and all(len(batch) <= 3 for batch in shown)
    summary = recorder.as_dict()["metrics"]
    assert summary["loss"]["count"] + summary["accuracy"]["count"] + summary["lr"]["count"] == total
    assert summary["loss"]["best"] == 1.0 / ((total - 1) // 3 * 3 + 1) and summary["accuracy"]["best"] == 0.5
    with (tmp_path / "moved.jsonl").open() as handle:
        assert sum(1 for _ in handle) == total


def test_last_is_the_greatest_step_then_time_then_arrival(tmp_path):
    recorder = MetricsRecorder(tmp_path / "metrics.jsonl", MetricsSpec(), lambda points: None)
    recorder.record([MetricPoint("loss", 0.3, 3, 30.0, "log"), MetricPoint("loss", 0.2, 4, 40.0, "log")])
    recorder.record([MetricPoint("loss", 0.9, 1, 10.0, "tensorboard")])  # older, read at the end
    recorder.record([MetricPoint("loss", 0.1, 4, 40.0, "file")])
    recorder.close()
    assert recorder.as_dict()["metrics"]["loss"] == {
        "last": 0.1,
        "best": 0.1,
        "best_step": 4,
        "count": 4,
        "goal": "minimize",
    }
    assert [p.value for p in read_series(tmp_path / "metrics.jsonl")] == [0.3, 0.2, 0.9, 0.1]  # as they came


def test_last_goes_by_step_when_tensorboard_points_come_late_with_another_clock(tmp_path):
    """TensorBoard's points are read at the end and carry the training host's time (behind ours here):
    the one with the greatest step is still the last."""
    recorder = MetricsRecorder(tmp_path / "metrics.jsonl", MetricsSpec(), lambda points: None)
    recorder.record([MetricPoint("loss", 0.5, 1, 100.0, "log"), MetricPoint("loss", 0.4, 2, 101.0, "log")])
    recorder.record(
        [MetricPoint("loss", 0.3, 3, 50.0, "tensorboard"), MetricPoint("loss", 0.45, 2, 49.0, "tensorboard")]
    )
    recorder.record([MetricPoint("loss", 0.9, None, 200.0, "file")])  # no step: before every point with one
    recorder.close()
    assert recorder.metrics_summary().metrics["loss"].last == 0.3
    steps_only = MetricsRecorder(tmp_path / "other.jsonl", MetricsSpec(), lambda points: None)
    steps_only.record([MetricPoint("f1", 0.7, None, 20.0, "file"), MetricPoint("f1", 0.6, None, 10.0, "file")])
    steps_only.close()
    assert steps_only.metrics_summary().metrics["f1"].last == 0.7  # none has a step: the latest time


def test_metric_names_past_the_limit_go_to_disk_only(tmp_path):
    warnings = []
    recorder = MetricsRecorder(tmp_path / "metrics.jsonl", MetricsSpec(), lambda points: None, warn=warnings.append)
    recorder.record([MetricPoint(f"m{i}", 1.0, 0, 0.0, "file") for i in range(MAX_METRICS + 50)])
    recorder.record([MetricPoint(f"n{i}", 1.0, 0, 0.0, "file") for i in range(10)])
    recorder.close()
    assert len(recorder.as_dict()["metrics"]) == MAX_METRICS
    assert len(warnings) == 1 and f"more than {MAX_METRICS} metric names" in warnings[0]
    assert len(read_series(tmp_path / "metrics.jsonl")) == MAX_METRICS + 60


def test_a_full_disk_under_metrics_jsonl_keeps_the_summary(tmp_path):
    (tmp_path / "metrics.jsonl").symlink_to("/dev/full")
    warnings = []
    recorder = MetricsRecorder(tmp_path / "metrics.jsonl", MetricsSpec(), lambda points: None, warn=warnings.append)
    for step in range(3):
        recorder.record([MetricPoint("loss", 1.0 - step / 10, step, float(step), "log")])
    recorder.close()
    assert recorder.as_dict()["metrics"]["loss"]["count"] == 3
    assert recorder.disk_full == tmp_path / "metrics.jsonl"
    assert recorder.failure == f"disk full writing {tmp_path / 'metrics.jsonl'}" and len(warnings) == 1


def test_curves_from_a_long_series_are_bounded():
    points = (MetricPoint("loss", 1.0 / (i + 1), i, float(i), "log") for i in range(100_000))  # read once
    drawn = curves(points, {"primary": "val_accuracy"})  # looked for first: not there
    assert [curve["name"] for curve in drawn] == ["loss"]
    assert len(drawn[0]["steps"]) <= 61 and drawn[0]["steps"][0] == 0
