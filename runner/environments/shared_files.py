"""Identical files of cached environments are kept once on disk.

Every cached virtualenv holds its own TensorFlow (~1.4 GB); ten environments that differ by one
package each would cost 14 GB. After a build, each large regular file of the new environment is
hashed and, when the cache already holds the same bytes (same sha256, size and mode), replaced by a
hard link to them: `<cache>/files/<sha256[:2]>/<sha256>` is one more name of the first copy, so a
second environment with the same wheels costs only what differs (what pnpm and uv do for the same
reason). Removing an environment's folder frees nothing still used by another one; a stored file
no environment links to any more (its link count is 1) is dropped at the next build.

Hard links share their bytes: a training that writes into its environment's site-packages in place
would change every environment with that file (pip itself never does: it writes new files).
Sharing is best effort: a file it cannot link (another file system, a race with a second build) is
left as it was, never lost; `TFTRAIN_SHARE_ENV_FILES=0` turns it off.
"""

from __future__ import annotations

import dataclasses
import os
import stat
from pathlib import Path

STORE = "files"
MIN_SIZE = 64 * 1024  # smaller files: hashing and a link each cost more than they save
SWITCH = "TFTRAIN_SHARE_ENV_FILES"


@dataclasses.dataclass
class Shared:
    """What one pass did: files now linked to a stored copy and the bytes that saved."""

    linked: int = 0
    saved: int = 0
    stored: int = 0
    dropped: int = 0


def enabled() -> bool:
    return os.environ.get(SWITCH, "1").strip().lower() not in ("0", "false", "no", "off")


def share_files(env_dir: Path, cache: Path) -> Shared:
    """Link env_dir's large files to identical ones already in the cache (storing the new ones)."""
    store = cache / STORE
    done = Shared()
    if not enabled():
        return done
    _drop_unused(store, done)
    for folder, _dirs, names in os.walk(env_dir):
        for name in names:
            _share(Path(folder) / name, store, done)
    return done


def _share(path: Path, store: Path, done: Shared) -> None:
    from runner.history.checksums import sha256_file  # after a build only: never before a script starts

    try:
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode) or info.st_size < MIN_SIZE or info.st_nlink != 1:
            return
        digest = sha256_file(path)
        kept = store / digest[:2] / digest
        kept.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, kept)  # the first copy of these bytes: it becomes the stored one
            done.stored += 1
            return
        except FileExistsError:
            pass
        other = kept.lstat()
        if other.st_size != info.st_size or stat.S_IMODE(other.st_mode) != stat.S_IMODE(info.st_mode):
            return
        temporary = path.with_name(f".{path.name}.tftrain-link-{os.getpid()}")
        os.link(kept, temporary)
        try:
            os.replace(temporary, path)
        except OSError:
            temporary.unlink(missing_ok=True)
            raise
        done.linked += 1
        done.saved += info.st_size
    except OSError:
        return  # left as it was: a copy of its own costs space, never a file


def _drop_unused(store: Path, done: Shared) -> None:
    if not store.is_dir():
        return
    for folder in store.iterdir():
        for kept in folder.iterdir() if folder.is_dir() else ():
            try:
                if kept.lstat().st_nlink == 1:
                    kept.unlink()
                    done.dropped += 1
            except OSError:
                continue
