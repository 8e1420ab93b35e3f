"""A training container's stdout and stderr reach the run as one stream, in the order written
(docker's two log copiers alone can put a line printed before a traceback inside it)."""

from __future__ import annotations

import os

import pytest
from conftest import BASE_IMAGE
from watching import until

from runner.plan.model import ContainerSpec
from runner.targets.container import Container

pytestmark = pytest.mark.integration

ALTERNATING = 'i=0; while [ $i -lt 2000 ]; do i=$((i+1)); echo "out $i"; echo "err $i" >&2; done'
WRITTEN = [f"{stream} {i}" for i in range(1, 2001) for stream in ("out", "err")]  # ALTERNATING's lines, in order


def run_container(docker_client, argv: list[str], one_stream: bool) -> tuple[int | None, str]:
    spec = ContainerSpec(image=BASE_IMAGE, mounts=(), user="", network_mode="none", one_stream=one_stream)
    name = f"tftrain-test-streams-{os.getpid()}-{int(one_stream)}"
    read_fd, write_fd = os.pipe()
    with os.fdopen(read_fd, "rb") as output, Container(docker_client, spec, argv, {}, "/", name, {}) as container:
        container.start(write_fd)
        text = output.read().decode()  # until the streamer closes its end: the container has ended
        until(lambda: container.poll() is not None, f"{name} to end")
        return container.poll(), text


def test_lines_written_to_stdout_and_stderr_arrive_in_the_order_written(docker_client):
    code, text = run_container(docker_client, ["sh", "-c", ALTERNATING], one_stream=True)
    assert code == 0
    assert text.splitlines() == WRITTEN


def test_an_image_as_it_is_keeps_two_streams_and_every_line(docker_client):
    """user_managed images may lack /bin/sh: their containers run the argv as it is. Every line
    still arrives, in the order docker's two copiers logged them (the test above, run with
    one_stream=False, failed 8 times in 8 here)."""
    code, text = run_container(docker_client, ["sh", "-c", ALTERNATING], one_stream=False)
    assert code == 0
    assert sorted(text.splitlines()) == sorted(WRITTEN)


def test_a_program_the_image_lacks_is_one_line(docker_client):
    code, text = run_container(docker_client, ["no-such-program", "--flag"], one_stream=True)
    assert code == 127
    assert text == "tftrain: cannot start no-such-program: not found\n"


def test_arguments_reach_the_program_as_they_are(docker_client):
    odd = ["a b", "$HOME", "'quoted'", "; rm -rf /", "", "-n"]
    code, text = run_container(docker_client, ["printf", "[%s]\\n", *odd], one_stream=True)
    assert code == 0
    assert text.splitlines() == [f"[{arg}]" for arg in odd]
