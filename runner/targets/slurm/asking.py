"""The scheduler asked about a job in a thread of its own, one question at a time: a controller
that hangs holds that thread for up to jobs.COMMAND_SECONDS, never the run's judgment (the tasks'
exit files, read every poll) nor its console."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import NamedTuple

from runner.errors import FatalError
from runner.targets.slurm.jobs import JobInfo


class Answer(NamedTuple):
    info: JobInfo | None  # None: nothing knows the job (when `error` is None)
    error: Exception | None  # the scheduler's failure (FatalError), or a defect to raise where it is read
    number: int  # of the question it answers, from 1


class Asker:
    def __init__(self, ask: Callable[[], JobInfo | None]) -> None:
        self.ask = ask
        self.lock = threading.Condition()
        self.sent = 0
        self.busy = False
        self.sent_at = 0.0
        self.answer: Answer | None = None

    def send(self) -> int:
        """Ask, unless a question is out already; the number of the question whose answer is next."""
        with self.lock:
            if not self.busy:
                self.busy = True
                self.sent += 1
                self.sent_at = time.monotonic()
                threading.Thread(target=self._asking, args=(self.sent,), name="slurm-state", daemon=True).start()
            return self.sent

    def _asking(self, number: int) -> None:
        try:
            answer = Answer(self.ask(), None, number)
        except Exception as exc:  # FatalError: the scheduler's; anything else is raised by the reader
            answer = Answer(None, exc, number)
        with self.lock:
            self.answer, self.busy = answer, False
            self.lock.notify_all()

    def out_for(self) -> float:
        """How long the question now out has waited for its answer (0: none is out)."""
        with self.lock:
            return time.monotonic() - self.sent_at if self.busy else 0.0

    def newer(self, than: int) -> Answer | None:
        """The latest answer when it answers a question after number `than`."""
        with self.lock:
            return self.answer if self.answer is not None and self.answer.number > than else None

    def wait(self, number: int, timeout: float) -> Answer | None:
        """The answer to question `number` (or a later one), waiting up to `timeout` seconds."""
        with self.lock:
            self.lock.wait_for(lambda: self.answer is not None and self.answer.number >= number, timeout)
            return self.newer(number - 1)


def scheduler_failure(answer: Answer) -> FatalError | None:
    """The answer's error when it is the scheduler's; a defect is raised here, in the reader's thread."""
    if answer.error is None or isinstance(answer.error, FatalError):
        return answer.error
    raise answer.error
