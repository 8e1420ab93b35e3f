"""`checkpoints:`: the checkpoint directory copied to S3 while the training runs, and the latest
complete checkpoint brought back (`resume_from: checkpoint:RUN_ID`, a retry).

Under s3://bucket/prefix/RUN_ID the sync keeps `blobs/SHA256` (each file's content, under its
digest, so an object once named is never rewritten) and `tftrain-checkpoints.json`, put last: the
complete checkpoints, each file's path, size and sha256. A reader goes by that manifest only, so a
sync stopped anywhere (the machine lost mid-upload) never shows half a checkpoint.

A checkpoint is complete when its index is written: TensorFlow's `PREFIX.index` with all its
`PREFIX.data-K-of-N` shards (the index is written after the shards), Keras'
BackupAndRestore `training_metadata.json` no older than `latest.weights.h5` (written after the
weights), or a `.keras` file that is a whole zip. A file that changes while it is read or
uploaded waits for the next round.

The bucket is not trusted: whoever can write to it may have written the manifest. A reader parses
it with runner.training.checkpoint_listing (bounded, every field and name checked) and fetches the
latest checkpoint's files only, each checked against its size and sha256.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import threading
import time
import zipfile
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from runner.errors import DiskFullError, FatalError, PreparingError, StorageError
from runner.history.checksums import fresh_dir, sha256_file, writing
from runner.history.rundir import RunPaths
from runner.manifest import LoadedManifest
from runner.manifest.checkpoints import CheckpointsSpec
from runner.storage.s3 import Bucket, S3Target, download, upload
from runner.training.checkpoint_listing import (
    KERAS_METADATA,
    KERAS_WEIGHTS,
    MAX_BYTES,
    MAX_CHECKPOINTS,
    SHARD,
    VERSION,
    CheckpointKind,
    ListedCheckpoint,
    listing_problem,
    parse_listing,
)

MANIFEST = "tftrain-checkpoints.json"


@dataclass(frozen=True)
class Checkpoint:
    name: str  # relative to the checkpoint directory, POSIX
    kind: CheckpointKind
    files: tuple[str, ...]  # data first, the index last
    time: float  # when its index was written


@dataclass(frozen=True)
class Location:
    bucket: str
    prefix: str
    endpoint_url: str | None

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def key(self, name: str) -> str:
        return f"{self.prefix}/{name}"

    def bucket_of(self) -> Bucket:
        return Bucket(self.bucket, self.endpoint_url)


def find_checkpoints(root: Path) -> list[Checkpoint]:
    """The complete checkpoints under `root`, oldest first."""
    found = []
    for index in sorted(root.rglob("*")) if root.is_dir() else ():
        if index.is_symlink() or not index.is_file():
            continue
        checkpoint = _complete(root, index)
        if checkpoint is not None:
            found.append(checkpoint)
    return sorted(found, key=lambda checkpoint: (checkpoint.time, checkpoint.name))


def _complete(root: Path, index: Path) -> Checkpoint | None:
    def relative(path: Path) -> str:
        return path.relative_to(root).as_posix()

    stat = index.stat()
    if index.suffix == ".index":
        prefix = index.name[: -len(".index")]
        shards = [p for p in index.parent.glob(f"{glob_escape(prefix)}.data-*-of-*") if _shard_of(p.name, prefix)]
        counts = {int(_shard_of(p.name, prefix)["count"]) for p in shards}
        if len(counts) != 1 or len(shards) != counts.pop():
            return None
        files = (*sorted(relative(p) for p in shards), relative(index))
        return Checkpoint(relative(index)[: -len(".index")], CheckpointKind.TENSORFLOW, files, stat.st_mtime)
    if index.name == KERAS_METADATA:
        weights = index.parent / KERAS_WEIGHTS
        if not weights.is_file() or weights.stat().st_mtime_ns > stat.st_mtime_ns:  # the weights are being rewritten
            return None
        name = relative(index.parent) if index.parent != root else root.name
        return Checkpoint(name, CheckpointKind.KERAS_BACKUP, (relative(weights), relative(index)), stat.st_mtime)
    if index.suffix == ".keras" and zipfile.is_zipfile(index):
        return Checkpoint(relative(index), CheckpointKind.KERAS_FILE, (relative(index),), stat.st_mtime)
    return None


def glob_escape(text: str) -> str:
    return re.sub(r"([*?[])", r"[\1]", text)


def _shard_of(name: str, prefix: str):
    match = SHARD.match(name)
    return match if match and match["prefix"] == prefix else None


class CheckpointSync:
    """Copies the complete checkpoints of `root` to `location` every `every` seconds on its own
    thread while used as a context manager, and once more when the block ends."""

    def __init__(
        self,
        root: Path,
        location: Location,
        every: float,
        logger,
        seed: Path | None = None,
        staging: Path | None = None,
    ) -> None:
        self.root, self.location, self.every, self.logger, self.seed = root, location, every, logger, seed
        # where the copy of a file being uploaded lies (the system's temporary directory by default)
        self.staging = staging
        self._digests: dict[str, tuple[tuple[int, int], str]] = {}  # path → (size, mtime) it had, sha256
        self._uploaded: set[str] = set()
        self._listed: list[dict] = []
        self._kept: set[str] = set()  # blobs the manifest before this one named: a reader may be fetching them
        self._unlistable: set[str] = set()  # checkpoints already warned about
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.rounds = 0

    def check(self) -> None:
        """One line before the training starts: no such bucket, refused, or no answer."""
        self.location.bucket_of().check(self.location.uri)

    def __enter__(self) -> CheckpointSync:
        if self.seed is not None and self.seed.is_dir():  # resume_from: checkpoint:… continues in the same directory
            shutil.copytree(self.seed, self.root, dirs_exist_ok=True)
        self._thread = threading.Thread(target=self._loop, name="checkpoint-sync", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._round()  # whatever the outcome: what the training wrote last
        if self._listed:
            latest = self._listed[-1]
            self.logger.info(
                f"checkpoints: {self.location.uri} holds {len(self._listed)} complete, the latest {latest['name']}"
            )

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self._round()

    def _round(self) -> None:
        try:
            self.sync()
        except (FatalError, OSError) as exc:  # the training goes on; the next round tries again
            self.logger.warning(f"checkpoints: sync to {self.location.uri} failed: {exc}")
        except Exception as exc:  # noqa: BLE001 — a thread must not die silently mid-training
            self.logger.warning(f"checkpoints: sync to {self.location.uri} failed: {type(exc).__name__}: {exc}")

    def sync(self) -> bool:
        """One round; whether the manifest changed."""
        self.rounds += 1
        listed = []
        for checkpoint in self._listable(find_checkpoints(self.root)[-MAX_CHECKPOINTS:]):
            files = {}
            for name in checkpoint.files:
                sent = self._send(name)
                if sent is None:
                    break
                files[name] = sent
            else:
                listed.append(
                    {"name": checkpoint.name, "kind": checkpoint.kind.value, "time": checkpoint.time, "files": files}
                )
        listed, body = _fitting(listed)
        # a directory emptied at the end (delete_checkpoint) keeps the last list
        if not listed or listed == self._listed:
            return False
        self.location.bucket_of().put(self.location.key(MANIFEST), body, "application/json")
        named = {entry["sha256"] for item in listed for entry in item["files"].values()}
        self._prune(self._uploaded - named - self._kept)
        self._kept, self._listed = named, listed
        return True

    def _listable(self, found: list[Checkpoint]) -> list[Checkpoint]:
        """The checkpoints a reader would accept (runner.training.checkpoint_listing's rules); each
        one left out is said once, not every round."""
        kept = []
        for checkpoint in found:
            problem = listing_problem(checkpoint.name, checkpoint.kind, checkpoint.files)
            if problem is None:
                kept.append(checkpoint)
            elif checkpoint.name not in self._unlistable:
                self._unlistable.add(checkpoint.name)
                self.logger.warning(f"checkpoints: not synced, a run could not resume from it: {problem}")
        return kept

    def _send(self, name: str) -> dict | None:
        """Upload one file under its digest; None when it changed while it was copied (still being
        written). The upload reads a copy taken in one pass with the digest: a training rewriting
        the file each epoch (Keras' BackupAndRestore, in place) only has to stay still for the
        copy, not for the whole upload, which on a loaded machine may take longer than an epoch."""
        path = self.root / name
        try:
            before = _stamp(path)
            known = self._digests.get(name)
            if known and known[0] == before and known[1] in self._uploaded:
                digest = known[1]
            else:
                with tempfile.NamedTemporaryFile(prefix=".checkpoint-sync-", dir=self.staging) as copy:
                    digest = sha256_file(path, copy)
                    if _stamp(path) != before:
                        return None
                    if digest not in self._uploaded:
                        upload(
                            S3Target(self.location.bucket, self.location.prefix, self.location.endpoint_url),
                            Path(copy.name),
                            f"blobs/{digest}",
                            digest,
                        )
                        self._uploaded.add(digest)
        except FileNotFoundError:  # replaced or removed between listing and reading
            return None
        self._digests[name] = (before, digest)
        return {"sha256": digest, "size": before[0]}

    def _prune(self, digests: set[str]) -> None:
        if not digests:
            return
        bucket = self.location.bucket_of()
        for digest in digests:
            bucket.delete(self.location.key(f"blobs/{digest}"))
            self._uploaded.discard(digest)


def _fitting(listed: list[dict]) -> tuple[list[dict], bytes]:
    """The newest of `listed` whose listing a reader accepts (MAX_BYTES at most: the older half
    goes until it fits), and that listing's body."""
    while True:
        body = json.dumps(
            {"version": VERSION, "written": time.time(), "checkpoints": listed}, indent=2, sort_keys=True
        ).encode()
        if len(body) <= MAX_BYTES or len(listed) <= 1:
            return listed, body
        listed = listed[len(listed) // 2 :]


def _stamp(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns


def checkpoint_sync(loaded: LoadedManifest, paths: RunPaths, run_id: str, logger) -> AbstractContextManager:
    """The sync around Running, checked now (Preparing): an unusable bucket stops the run before it trains."""
    spec = loaded.manifest.checkpoints
    if spec is None:
        return nullcontext()
    location = location_of(spec, run_id)
    sync = CheckpointSync(
        paths.workdir / spec.dir, location, spec.every_seconds, logger, _seed(loaded, paths), staging=paths.root
    )
    try:
        sync.check()
    except StorageError as exc:
        raise StorageError(f"checkpoints.sync_to: {exc}") from None
    logger.info(f"checkpoints: {spec.dir} → {location.uri} every {spec.every_seconds:g} s")
    return sync


def _seed(loaded: LoadedManifest, paths: RunPaths) -> Path | None:
    """What the checkpoint directory starts with: the checkpoint `resume_from: checkpoint:RUN_ID`
    brought (prepare() puts it in the run's resume/ directory), or another run's own checkpoint
    directory (a retry whose previous attempt synced nothing: runner.training.retry)."""
    ref = loaded.manifest.resume_from or ""
    if ref.startswith("checkpoint:"):
        return paths.root / "resume"
    runs, path = paths.root.parent, Path(ref)
    if not path.is_absolute() or not path.is_relative_to(runs) or path == runs:
        return None
    other = RunPaths(runs / path.relative_to(runs).parts[0])
    return path if path == other.workdir / loaded.manifest.checkpoints.dir else None


def location_of(spec: CheckpointsSpec, run_id: str, endpoint_url: str | None = None) -> Location:
    return Location(spec.bucket, spec.prefix_for(run_id), endpoint_url or spec.endpoint_url)


def synced_checkpoints(source: str, store=None, endpoint_url: str | None = None) -> tuple[ListedCheckpoint, ...]:
    """The complete checkpoints run `source` (looked up in `store`), or s3://bucket/prefix/RUN_ID,
    synced, as its tftrain-checkpoints.json lists them; () when it finished none yet."""
    return _listed(_where(source, store, endpoint_url))


def _listed(location: Location) -> tuple[ListedCheckpoint, ...]:
    """The listing read bounded (MAX_BYTES) and checked by checkpoint_listing.parse_listing: the
    bucket is not trusted, so anything wrong with it is one StorageError naming it."""
    where = f"{location.uri}/{MANIFEST}"
    body = location.bucket_of().read(location.key(MANIFEST), MAX_BYTES)
    if body is None:
        return ()  # the run never finished a checkpoint
    return parse_listing(body, where)


def latest_checkpoint(source: str, destination: Path, store=None, endpoint_url: str | None = None) -> Path | None:
    """Bring the latest complete checkpoint synced by run `source` (looked up in `store`), or
    under `source` = s3://bucket/prefix/RUN_ID, into `destination` (made fresh); None when
    nothing complete was synced yet. Only that checkpoint's files are fetched, each checked
    against the listing's size and sha256. TensorFlow checkpoints get a `checkpoint` file naming
    them, so tf.train.latest_checkpoint(destination/…) finds them."""
    location = _where(source, store, endpoint_url)
    listed = _listed(location)
    if not listed:
        return None
    latest = max(listed, key=lambda checkpoint: checkpoint.time)
    where = f"{location.uri}/{MANIFEST}"
    with fresh_dir(destination) as staging:
        _room_for(latest, staging, where)
        for file in latest.files:  # names checked by parse_listing: relative, inside, no collisions
            target = staging / file.name
            pointer = {
                "uri": f"s3://{location.bucket}/{location.key('blobs/' + file.sha256)}",
                "size": file.size,
                "sha256": file.sha256,
            }
            with writing(target):
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    download(pointer, target, location.endpoint_url, source="the listing")
                except StorageError as exc:
                    raise StorageError(f"{where}, file {file.name}: {exc}") from None
        state = latest.state_file()
        if state is not None:
            with writing(staging / state[0]):
                (staging / state[0]).write_text(state[1])
    return destination


def _room_for(checkpoint: ListedCheckpoint, staging: Path, where: str) -> None:
    """Refuse before fetching a checkpoint the disk cannot hold: the sizes come from the listing,
    and download() fetches no object of another size than listed."""
    needed, free = sum(file.size for file in checkpoint.files), shutil.disk_usage(staging).free
    if needed > free:
        raise DiskFullError(
            f"{where}: checkpoint {checkpoint.name} is {needed} bytes, {free} free under {staging.parent}"
        )


def _where(source: str, store, endpoint_url: str | None) -> Location:
    if source.startswith("s3://"):
        bucket, _, prefix = source[len("s3://") :].partition("/")
        return Location(bucket, prefix.strip("/"), endpoint_url)
    run = store.run(source)  # NotFoundError: no such run
    manifest, _ = RunPaths.of_run(run)
    if manifest.checkpoints is None:
        raise PreparingError(f"run {run.run_id} did not sync checkpoints (its manifest has no checkpoints:)")
    return location_of(manifest.checkpoints, run.run_id, endpoint_url)
