"""Everything tftrain prints goes through here, GitHub's workflow commands included (nothing
else prints them): groups per phase, masks, error/warning annotations, the step summary, outputs.

One writer thread owns stdout. Log chunks from training processes are queued without ever
blocking the reader that drained the pipe: past a byte budget the console skips them (they are
on disk already) and says how many lines it skipped. Messages from tftrain itself are never
skipped, and keep their order with the log lines.

Everything goes out through the run's Masker (secret values as ***), and text is always text:
what users wrote (messages, metric names, paths) is never read as rich markup.
"""

from __future__ import annotations

import io
import os
import queue
import re
import sys
import threading
from collections.abc import Iterable, Mapping
from contextlib import contextmanager
from pathlib import Path

from runner.settings import LoggerSettings
from runner.telemetry.masking import Masker, as_bytes

MAX_QUEUED_BYTES = 8 << 20
# A message is one styled line or more; only tables need rich, imported when the first is printed
# (the script starts before rich would have loaded).
SGR = {"bold": "1", "red": "31", "green": "32", "yellow": "33", "magenta": "35", "cyan": "36"}
CONTROL = str.maketrans("", "", "\a\b\v\f\r")  # what rich's Text strips


class Logger:
    def __init__(self, stream=None, max_queued: int = MAX_QUEUED_BYTES, settings: LoggerSettings | None = None) -> None:
        """`settings`: the job this prints to (the CLI resolves them from the environment, once);
        when not given, a plain console: no workflow commands, no colour unless a terminal."""
        self.settings = settings or LoggerSettings()
        self.stream = stream or sys.stdout
        self.out = getattr(self.stream, "buffer", None)
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.color = self.tty or self.settings.color
        self.max_queued = max_queued
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.queued = 0
        self.skipped: dict[str, int] = {}
        self.lock = threading.Lock()
        self.broken = False
        self.thread: threading.Thread | None = None
        self.github = self.settings.actions
        self.masker = Masker()
        self.live_lines = 0  # the rows of the live table last drawn, while nothing was printed below it

    def on_stderr(self) -> Logger:
        """A logger with these settings and masks that prints to stderr: what a command says on the way
        while its stdout holds what it prints for a program to read (JSON, YAML)."""
        beside = Logger(sys.stderr, self.max_queued, self.settings)
        beside.masker = self.masker
        return beside

    # --- the writer -------------------------------------------------------------------------
    def _ensure_thread(self) -> None:
        if self.thread is None:
            self.thread = threading.Thread(target=self._write_loop, name="console", daemon=True)
            self.thread.start()

    def _write_loop(self) -> None:
        while True:
            item = self.queue.get()
            if item is None:
                return
            data, droppable = item
            if droppable:
                with self.lock:
                    self.queued -= len(data)
            self._write(data)

    def _write(self, data: bytes) -> None:
        if self.broken:
            return
        try:
            if self.out is not None:
                self.out.write(data)
            else:
                self.stream.write(data.decode("utf-8", "replace"))
            self.stream.flush()
        except (BrokenPipeError, ValueError, OSError):
            self.broken = True  # nobody is reading the console any more; the logs are on disk

    def emit(self, data: bytes) -> None:
        self._ensure_thread()
        self.live_lines = 0  # printed below a live table: the next one is drawn below this
        self.queue.put((self.masker.chunk(data), False))

    def log_chunk(self, data: bytes, kept: str) -> None:
        """A chunk of whole lines from a training process; may be skipped, never blocks. `kept` says
        where skipped lines are ("all are in …/0.log"; "lost: …" once that log cannot be written)."""
        self._ensure_thread()
        data = self.masker.chunk(data)
        with self.lock:
            if self.queued + len(data) > self.max_queued:
                self.skipped[kept] = self.skipped.get(kept, 0) + data.count(b"\n")
                return
            self.queued += len(data)
            skipped, self.skipped = self.skipped, {}
        for notice in _skipped_notices(skipped):
            self.queue.put((notice, False))
        self.queue.put((data, True))

    def flush(self) -> None:
        """Wait until everything queued is written."""
        if self.thread is None:
            return
        with self.lock:
            skipped, self.skipped = self.skipped, {}
        for notice in _skipped_notices(skipped):
            self.emit(notice)
        self.queue.put(None)
        self.thread.join()
        self.thread = None

    # --- formatted messages -----------------------------------------------------------------
    def _render(self, message: str, style: str | None = None) -> bytes:
        """One message, masked, each line styled on its own (as rich prints a styled text)."""
        lines = self.masker.text(message).translate(CONTROL).expandtabs(8).split("\n")
        if self.color and style:
            start = "\x1b[" + ";".join(SGR[word] for word in style.split()) + "m"
            lines = [f"{start}{line}\x1b[0m" if line else line for line in lines]
        return as_bytes("\n".join(lines) + "\n")

    def _render_table(self, table) -> bytes:
        from rich.console import Console

        buffer = io.StringIO()
        # A terminal's own width; elsewhere (CI logs, pipes) wide enough that ids are never cut.
        width = None if self.tty else 200
        console = Console(
            file=buffer,
            force_terminal=self.color,
            no_color=not self.color,
            width=width,
            highlight=False,
            soft_wrap=True,
            markup=False,
            emoji=False,
        )
        console.print(table)
        return as_bytes(buffer.getvalue())

    def _text(self, text: str):
        """Masked before rich lays it out (a table may fold a long value over two lines)."""
        from rich.text import Text

        return Text(self.masker.text(text))

    def info(self, message: str, style: str | None = None) -> None:
        self.emit(self._render(message, style=style))

    def warning(self, message: str) -> None:
        self.annotate_located("warning", message)
        self.emit(self._render(f"warning: {message}", style="yellow"))

    def error(self, message: str) -> None:
        self.emit(self._render(f"error: {message}", style="bold red"))

    def phase(self, name: str) -> None:
        if self.github:
            self._command("group", name)
        self.emit(self._render(f"▶ {name}", style="bold cyan"))

    def phase_done(self, name: str, seconds: float, ok: bool = True) -> None:
        if self.github:
            self._command("endgroup")
        mark, style = ("✔", "green") if ok else ("✘", "red")
        self.emit(self._render(f"{mark} {name} {seconds:.2f}s", style=style))

    # --- GitHub Actions -----------------------------------------------------------------------
    def _command(self, name: str, message: str = "", **properties) -> None:
        # masked before escaping: a secret holding "%", ":" or a newline is escaped out of shape
        mask = self.masker.text
        props = ",".join(
            f"{key}={_escape_property(mask(str(value)))}" for key, value in properties.items() if value is not None
        )
        self.emit(as_bytes(f"::{name}{' ' + props if props else ''}::{_escape_data(mask(message))}\n"))

    def mask_secrets(self, names: Iterable[str], environ: Mapping[str, str]) -> None:
        """Hide the values of the manifest's `secrets:`, variables of tftrain's environment that the
        CLI hands in: the one way `tftrain run`, a sweep's trials and `tftrain runs show` mask them."""
        for name in names:
            self.mask(environ.get(name, ""))

    def mask(self, value: str) -> None:
        """Hide a secret from here on, in everything tftrain prints and stores, and in GitHub's log
        (each line of it: GitHub matches lines). Call before anything could print it."""
        if not self.masker.add([value]):
            return  # known already, or empty
        if self.github:
            self._ensure_thread()
            for line in value.splitlines():
                if line.strip():  # straight to the queue: emit() would mask the command itself
                    self.queue.put((as_bytes(f"::add-mask::{_escape_data(line)}\n"), False))

    def annotate(self, level: str, message: str, file: str | None = None, line: int | None = None) -> None:
        """An error/warning annotation, on a file and line where one is known."""
        if self.github:
            self._command(level, message, file=file, line=line)

    def annotate_located(self, level: str, text: str) -> None:
        """Annotate `path:line: message` lines (manifest errors and warnings) at their line."""
        for entry in text.splitlines():
            match = LOCATED.match(entry)
            if match:
                self.annotate(level, match["message"], self.workspace_path(Path(match["file"])), int(match["line"]))
            else:
                self.annotate(level, entry)

    @contextmanager
    def group(self, title: str):
        if self.github:
            self._command("group", title)
        try:
            yield
        finally:
            if self.github:
                self._command("endgroup")

    def workspace_path(self, path: Path) -> str:
        return _relative_to(path, self.settings.workspace)

    def step_summary(self, markdown: str) -> None:
        path = self.settings.step_summary
        if path:
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(self.masker.text(markdown).rstrip("\n") + "\n")

    def outputs(self, values: dict[str, str]) -> None:
        """Step outputs for the action ($GITHUB_OUTPUT); multi-line values get a random delimiter."""
        path = self.settings.output
        if not path:
            return
        with open(path, "a", encoding="utf-8") as handle:
            for key, value in values.items():
                delimiter = f"tftrain_{os.urandom(16).hex()}"
                handle.write(f"{key}<<{delimiter}\n{self.masker.text(value)}\n{delimiter}\n")

    def metrics(self, points: Iterable) -> None:
        text = "  ".join(f"{p.name}={p.value:.6g}" for p in points)
        steps = {p.step for p in points}
        step = f" step {steps.pop()}" if len(steps) == 1 and None not in steps else ""
        self.emit(self._render(f"  ◆ metrics{step}: {text}", style="magenta"))

    def table(
        self,
        title: str,
        columns: list[str],
        rows: list[list[str]],
        highlight_row: int | None = None,
        live: bool = False,
    ) -> None:
        """`live`: on a terminal, drawn over the live table printed last (a sweep's trials as they go)."""
        from rich.table import Table

        table = Table(title=self._text(title), title_justify="left")
        for column in columns:
            table.add_column(self._text(column), overflow="fold")
        for index, row in enumerate(rows):
            cells = (self._text(str(cell)) for cell in row)
            table.add_row(*cells, style="bold yellow" if index == highlight_row else None)
        data = self._render_table(table)
        redraw = f"\x1b[{self.live_lines}F\x1b[J".encode() if live and self.tty and self.live_lines else b""
        self.emit(redraw + data)
        if live and self.tty:
            self.live_lines = data.count(b"\n")

    def text(self, message: str) -> None:
        """Plain output (listings, logs), written as is."""
        self.emit(as_bytes(message if message.endswith("\n") else message + "\n"))


LOCATED = re.compile(r"^(?P<file>[^:\s][^:]*):(?P<line>\d+): (?P<message>.*)$")


def _relative_to(path: Path, workspace: Path | None) -> str:
    """A path as GitHub's annotations want it: relative to the checkout (`workspace`, else the
    current directory)."""
    root = (workspace or Path.cwd()).resolve()
    resolved = path.resolve()
    return resolved.relative_to(root).as_posix() if resolved.is_relative_to(root) else str(path)


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _skipped_notices(skipped: dict[str, int]) -> list[bytes]:
    return [
        f"[tftrain] {lines} lines not shown (console too slow); {kept}\n".encode() for kept, lines in skipped.items()
    ]
