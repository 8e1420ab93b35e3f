"""What the gate may read of a model: files under outputs/ that a version holds, never a link.

Registration copies regular files and directories only: a link under the model path is skipped,
never opened (runner.history.checksums). TensorFlow follows links. So before the gate loads
anything, the model path is walked once by lstat, and:

- a link that leaves outputs/ (the model path itself, a directory above it, or anything below
  it) is refused: the gate, the ONNX export and registration never read a file from outside;
- a link inside outputs/ under the model the gate would load is refused too: the version would
  not hold what the gate checked;
- other links inside outputs/ (beside the model, not read by the gate) are skipped and listed by
  registration, as before.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from runner.errors import ModelGateError
from runner.history.checksums import EntryKind, kind_of, walk
from runner.serving.signature import Located


@dataclass(frozen=True)
class Link:
    path: Path  # where the link is (not where it leads)
    leaves: bool  # it leads outside outputs/ (or past a link that does)


def model_links(workdir: Path, outputs_dir: str, model_path: str) -> list[Link]:
    """The links on the way from outputs/ to the model path and below it, in walk order."""
    base = workdir.resolve() / outputs_dir
    found = []
    here = workdir
    for part in Path(model_path).parts:
        here = here / part
        if kind_of(here) is EntryKind.SYMLINK:
            found.append(Link(here, _leaves(here, base)))
    target = workdir / model_path
    if kind_of(target) is EntryKind.DIRECTORY:
        found += [
            Link(entry.path, _leaves(entry.path, base)) for entry in walk(target) if entry.kind is EntryKind.SYMLINK
        ]
    return found


def _leaves(link: Path, base: Path) -> bool:
    """Where the link leads, every link on the way resolved, is not under `base`."""
    return not Path(os.path.realpath(link)).is_relative_to(base)


def refuse_leaving(links: list[Link], workdir: Path) -> None:
    """ModelGateError naming the first link that leads out of outputs/."""
    leaving = [link for link in links if link.leaves]
    if leaving:
        raise ModelGateError(
            f"{_name(leaving[0], workdir)} is a link that leads out of the outputs directory{_more(leaving)}: the gate,"
            " the ONNX export and registration never follow a link out of it (write the files there instead)"
        )


def refuse_read_through(links: list[Link], model_path: Path, located: Located | None, workdir: Path) -> None:
    """ModelGateError naming the first link the gate would load through: the model path itself
    (registration refuses it too), or anything in the model it found there."""
    read = [link for link in links if link.path == model_path]
    if located is not None:
        read += [link for link in links if link.path.is_relative_to(located.path) or link.path == located.weights]
    if read:
        raise ModelGateError(
            f"{_name(read[0], workdir)} is a link{_more(read)}: a registered version holds no links, so the gate would "
            "check files the version does not hold (write the files there instead of linking them)"
        )


def _name(link: Link, workdir: Path) -> str:
    return printable(link.path.relative_to(workdir).as_posix())


def printable(text: str) -> str:
    """`text` (a file name, or a message naming one) as one printable line: a newline, a control
    character or a byte that is no UTF-8 is shown escaped, never written as it is."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def _more(links: list[Link]) -> str:
    return f" (and {len(links) - 1} more link{'s' if len(links) > 2 else ''})" if len(links) > 1 else ""
