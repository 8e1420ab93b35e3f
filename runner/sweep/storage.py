"""Where a sweep's Optuna study lives: SQLite in TFTRAIN_HOME by default, or a PostgreSQL server
that many runners share (the manifest's `sweep.storage`).

Both are Optuna RDBStorages. Creating one creates its tables, and two workers doing that at once
collide (duplicate keys), so creation is serialised: a file lock beside the SQLite file, an advisory
lock on the PostgreSQL server. A storage that cannot be reached is a StorageError naming
user@host:port/database and the reason, never the password: when it is opened, and when it goes
away under a running sweep (StoragePlace.failures, one mechanism for every call into the study).
"""

from __future__ import annotations

import fcntl
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from runner.errors import FatalError, StorageError, extra_module

SQLITE_NAME = "sweeps.db"
CONNECT_SECONDS = 10
# How long a SQLite writer waits for another's transaction: trials of one machine write their
# reports and states one at a time, and each write is short
BUSY_SECONDS = 60
# pg_advisory_lock's key for creating Optuna's tables (any constant; "tftrain-sweep" as bytes)
INIT_LOCK_KEY = 0x7466747261696E
POSTGRES_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")
# psycopg's wording around the reason: 'connection failed: connection to server at "h" (addr),
# port 5432 failed: FATAL:  password authentication failed for user "u"'
CONNECTION_PREFIX = re.compile(
    r'^(?:connection failed: )?(?:connection to server at "[^"]*"(?: \([^)]*\))?, port \d+ failed: )?(?:FATAL:\s+)?'
)
CHAIN_LIMIT = 16  # how far down __cause__/__context__ a database error is looked for


@dataclass(frozen=True)
class StoragePlace:
    """Where a sweep's study lives as messages name it (user@host:port/database, or the SQLite
    file), and the password no message may hold."""

    where: str
    password: str | None = None

    def error(self, exc: BaseException) -> StorageError | None:
        """`exc` as one StorageError line when the storage failed under it (a database error in its
        chain: Optuna wraps SQLAlchemy's in StorageInternalError, whose own text says nothing), else None."""
        cause = _database_cause(exc)
        if cause is None:
            return None
        reason = _reason(cause)
        if self.password:
            reason = reason.replace(self.password, "***")
        return StorageError(f"sweep storage {self.where}: {reason}")

    @contextmanager
    def failures(self) -> Iterator[None]:
        """Around any use of the study: a storage that fails is that one line (exit 18), no traceback."""
        try:
            yield
        except FatalError:
            raise
        except Exception as exc:
            error = self.error(exc)
            if error is None:
                raise
            raise error from None


def place_of(url: str | None, home: Path) -> StoragePlace:
    """How messages name the storage of `url` (None: SQLite at home/sweeps.db)."""
    if url is None:
        return StoragePlace(str(home / SQLITE_NAME))
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if scheme in POSTGRES_SCHEMES:
        return _postgres_url(url)[1]
    if scheme == "sqlite" and url.startswith("sqlite:///"):
        return StoragePlace(url[len("sqlite:///") :])
    return StoragePlace("(unsupported)")


def storage_for(url: str | None, home: Path):
    """The Optuna storage for `url` (None: SQLite at home/sweeps.db)."""
    optuna = extra_module("optuna", "sweep", "sweep:")
    if url is None:
        return _sqlite(optuna, home / SQLITE_NAME)
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if scheme in POSTGRES_SCHEMES:
        return _postgres(optuna, url)
    if scheme == "sqlite" and url.startswith("sqlite:///"):
        return _sqlite(optuna, Path(url[len("sqlite:///") :]))
    raise StorageError(
        f"sweep storage: unsupported scheme {scheme or '(none)'!r}: use postgresql://user:password@host:port/database, "
        "or leave storage out for SQLite in TFTRAIN_HOME"
    )


def _sqlite(optuna, path: Path):
    try:
        with StoragePlace(str(path)).failures():
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path.with_name(path.name + ".lock"), "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                # WAL lets readers go on while a trial writes; the mode is stored in the file, so set once
                with sqlite3.connect(path, timeout=BUSY_SECONDS) as connection:
                    connection.execute("PRAGMA journal_mode=WAL")
                return optuna.storages.RDBStorage(
                    f"sqlite:///{path}", engine_kwargs={"connect_args": {"timeout": BUSY_SECONDS}}
                )
    except OSError as exc:
        raise StorageError(f"sweep storage {path}: {exc}") from None


def _postgres_url(url: str):
    """SQLAlchemy's URL for `url` (the psycopg driver) and its place."""
    import sqlalchemy

    try:
        # SQLAlchemy reads plain postgresql:// as psycopg2, which the extra does not bring
        parsed = sqlalchemy.engine.make_url(url).set(drivername="postgresql+psycopg")
    except Exception:  # its message quotes the URL, password included
        raise StorageError(
            "sweep storage: not a database URL (postgresql://user:password@host:port/database)"
        ) from None
    where = f"{parsed.host or 'localhost'}:{parsed.port or 5432}/{parsed.database or ''}"
    if parsed.username:
        where = f"{parsed.username}@{where}"
    return parsed, StoragePlace(where, parsed.password or parsed.query.get("password") or None)


def _postgres(optuna, url: str):
    extra_module("psycopg", "sweep", "a postgresql:// sweep storage")
    import sqlalchemy
    from sqlalchemy.pool import NullPool

    parsed, place = _postgres_url(url)
    connect_args = {} if "connect_timeout" in parsed.query else {"connect_timeout": CONNECT_SECONDS}
    full = parsed.render_as_string(hide_password=False)
    with place.failures():
        with _advisory_lock(sqlalchemy.create_engine(parsed, connect_args=connect_args, poolclass=NullPool)):
            return optuna.storages.RDBStorage(full, engine_kwargs={"connect_args": connect_args, "pool_pre_ping": True})


@contextmanager
def _advisory_lock(engine):
    """The server-wide lock for creating Optuna's tables, held on a connection of its own; closing
    that connection (NullPool) releases it, also when the creation fails."""
    import sqlalchemy

    try:
        with engine.connect() as connection:
            connection.execute(sqlalchemy.text("SELECT pg_advisory_lock(:key)"), {"key": INIT_LOCK_KEY})
            yield
    finally:
        engine.dispose()


def _database_error(exc: BaseException) -> bool:
    import sqlalchemy.exc

    return isinstance(exc, (sqlalchemy.exc.DBAPIError, sqlalchemy.exc.TimeoutError))


def _database_cause(exc: BaseException) -> BaseException | None:
    """The database error in exc's chain (itself, or what it was raised from or during)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < CHAIN_LIMIT:
        if _database_error(current) or isinstance(current, sqlite3.Error):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _reason(exc: BaseException) -> str:
    """The driver's own first line (SQLAlchemy's adds the statement and a link)."""
    text = str(getattr(exc, "orig", None) or exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return CONNECTION_PREFIX.sub("", line).strip() or line
