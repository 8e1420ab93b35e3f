"""The answers of user_managed's TensorFlow check (runner/environments/user_managed.py), kept.

Importing TensorFlow takes seconds to tens of seconds; what it answers changes only when the
interpreter or what it can import changes. So an answer is kept under a key made of exactly that:
the path as given and where it leads (`which`, then the real file, with its device, inode, size
and mtime), what one short process of it says of itself (nothing imported that `site` has not
loaded: a few milliseconds; executable, prefix, version, and the import path after `site` ran, so
.pth files and PYTHONPATH are in it), the device, inode, size and mtime of every directory on that
path (a `pip install` or `uninstall` adds or removes entries in site-packages, which moves its
mtime), and PYTHONPATH itself. An image's check is kept under the image's content-addressed id
(the same bytes on any daemon) and the interpreter named in it.

The current directory (the '' at the head of the import path) is left out: it is wherever tftrain
was started, not part of the interpreter.

An entry is a small JSON file named by the key's SHA-256 under the cache directory, holding that
digest again and the version; it is written whole (a temporary file renamed). The cache directory
may be shared with others: an entry is believed only when it is a regular file (never a link),
ours (our uid, writable by nobody else), small, of our format, and names the same digest — anything
else is ignored and replaced by the next answer. A failed check is never kept; a cache that
cannot be read or written only costs the import.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from runner.history.regular import READ_FLAGS
from runner.paths import cache_dir

FORMAT = 1
MAX_ENTRY_BYTES = 4 << 10  # an entry is about 120 bytes
MAX_LAYOUT_BYTES = 1 << 20  # the import path of a very large environment is a few KiB
LAYOUT_TIMEOUT = 60
# What the interpreter says of itself, NUL-separated (no path holds a NUL): nothing that `site` has not loaded already
LAYOUT_PROBE = (
    "import os, sys; sys.stdout.buffer.write(b'\\0'.join(map(os.fsencode, [sys.executable, sys.prefix, sys.version,"
    " *sys.path])))"
)
IMAGE_ID = re.compile(r"sha256:[0-9a-f]{64}")
VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}")  # what tf.__version__ looks like


def directory() -> Path:
    return cache_dir() / "user-managed"


def interpreter_key(python: str) -> str | None:
    """The key of `python`'s answer, or None when it cannot be told (it does not start, says
    nothing sensible): then the check runs and nothing is kept."""
    found = shutil.which(python)
    if found is None:
        return None
    try:
        real = os.path.realpath(found)
        described = [python, os.path.abspath(found), real, _stat(Path(real)), _stat(Path(found), follow=False)]
        done = subprocess.run(
            [python, "-c", LAYOUT_PROBE], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=LAYOUT_TIMEOUT
        )
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0 or len(done.stdout) > MAX_LAYOUT_BYTES:
        return None
    said = [os.fsdecode(part) for part in done.stdout.split(b"\0")]
    if len(said) < 4:
        return None
    folders = [entry for entry in said[3:] if os.path.isabs(entry)]
    return _digest(
        {
            "interpreter": described,
            "said": said,
            "folders": [[folder, _stat(Path(folder))] for folder in folders],
            "PYTHONPATH": os.environ.get("PYTHONPATH"),
        }
    )


def image_key(image_id: str | None, python: str) -> str | None:
    """The key of `python`'s answer in the image whose content-addressed id is `image_id`."""
    if not image_id or not IMAGE_ID.fullmatch(image_id):
        return None
    return _digest({"image": image_id, "python": python})


def kept(key: str | None) -> str | None:
    """The version kept under `key`; None when there is none that can be believed."""
    if key is None:
        return None
    try:
        fd = os.open(directory() / f"{key}.json", READ_FLAGS)  # a link is refused (O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if (
            not stat.S_ISREG(info.st_mode)
            or info.st_uid != os.geteuid()
            or info.st_mode & 0o022
            or info.st_size > MAX_ENTRY_BYTES
        ):
            return None
        try:
            data = json.loads(handle.read(MAX_ENTRY_BYTES + 1))
        except (OSError, ValueError, RecursionError):
            return None
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("key") != key:
        return None
    version = data.get("version")
    return version if isinstance(version, str) and VERSION.fullmatch(version) else None


def keep(key: str | None, version: str) -> None:
    """Keep a check's answer under `key`; never fails (the next check imports again)."""
    if key is None or not VERSION.fullmatch(version):
        return
    folder = directory()
    partial = None
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, partial = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".partial", dir=folder)  # O_EXCL, 0600
        with os.fdopen(fd, "w") as handle:
            handle.write(json.dumps({"format": FORMAT, "key": key, "version": version}) + "\n")
        os.replace(
            partial, folder / f"{key}.json"
        )  # replaces whatever was there, a link included, not what it points to
    except OSError:
        if partial is not None:
            Path(partial).unlink(missing_ok=True)


def _stat(path: Path, follow: bool = True) -> list[int] | None:
    try:
        info = path.stat() if follow else path.lstat()
    except OSError:
        return None  # absent: its appearing changes the key
    return [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_mode]


def _digest(source: dict) -> str:
    text = json.dumps({"format": FORMAT, **source}, sort_keys=True, ensure_ascii=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()
