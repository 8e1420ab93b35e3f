from __future__ import annotations

from runner.metrics.parsers import LogMetricParser

KERAS3_TTY = (
    b"Epoch 1/2\n"
    b"\r\x1b[1m1/6\x1b[0m \x1b[32m\xe2\x94\x81\x1b[0m \x1b[1m1s\x1b[0m 334ms/step - accuracy: 0.5312 - loss: 0.6679"
    b"\r\x1b[1m6/6\x1b[0m \x1b[32m\xe2\x94\x81\x1b[0m \x1b[1m0s\x1b[0m 23ms/step - accuracy: 0.5573 - loss: 0.6577"
    b" - val_accuracy: 0.5938 - val_loss: 0.6710\n"
    b"Epoch 2/2\n"
    b"6/6 - 0s - 3ms/step - accuracy: 0.6000 - loss: 0.6000 - val_accuracy: 0.6100 - val_loss: 6.1e-01\n"
)
KERAS2 = (
    b"Epoch 1/1\n"
    b"32/32 [==============================] - 1s 5ms/step - loss: 0.4962 - accuracy: 0.8573\n"
)


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
    assert parse([b"10/10 - 0s 2ms/step - accuracy: 0.97 - loss: 0.1\n"]) == [("accuracy", 0.97, None), ("loss", 0.1, None)]


def test_ordinary_lines_are_not_metrics():
    assert parse([b"loading 3/4 shards - please wait\nlr: 0.1\nEpoch time 3/4\n"]) == []


def test_regex_with_group_and_counter_steps():
    chunks = [b"iteration done acc=0.5\n", b"noise\nacc=0.75 more\n"]
    assert parse(chunks, {"acc": r"acc=([0-9.]+)"}) == [("acc", 0.5, 0), ("acc", 0.75, 1)]


def test_regex_named_step_and_value():
    assert parse([b"step 7: loss 0.25\n"], {"loss": r"step (?P<step>\d+): loss (?P<value>[0-9.]+)"}) == [("loss", 0.25, 7)]


def test_regex_sees_one_line_at_a_time():
    # `\s+` could cross a newline if the chunk were searched as one string
    assert parse([b"acc:\n0.5\nacc: 0.9\n"], {"acc": r"acc:\s+([0-9.]+)"}) == [("acc", 0.9, 0)]


def test_regex_uses_the_keras_epoch_as_step():
    chunk = b"Epoch 3/3\n1/1 - 0s - loss: 0.2\ntest accuracy: 0.97\n"
    assert ("test_accuracy", 0.97, 3) in parse([chunk], {"test_accuracy": r"test accuracy: ([0-9.]+)"})


def test_regex_ignores_non_numbers():
    assert parse([b"acc=abc\n"], {"acc": r"acc=(\S+)"}) == []
