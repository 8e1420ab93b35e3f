"""The pool's leases file: opened by many jobs at once, and damaged."""

import threading

import pytest

from runner.errors import PlacementError
from runner.targets.pool.leases import Leases


def test_jobs_opening_a_fresh_leases_file_at_once_all_open_it(tmp_path):
    """A sweep's two trials opened a fresh leases.db at once; switching it to WAL, one got
    'database is locked' at once (no busy wait) and the sweep stopped naming its own storage."""
    failures = []
    for attempt in range(60):
        state = tmp_path / str(attempt)
        start = threading.Barrier(3)

        def open_and_renew(start=start, state=state):
            start.wait()
            try:
                leases = Leases(state, 60)
                leases.renew("job")
                leases.close()
            except Exception as exc:
                failures.append(repr(exc))

        threads = [threading.Thread(target=open_and_renew) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failures == []


def test_a_damaged_leases_file_is_one_line_naming_it(tmp_path):
    (tmp_path / "leases.db").write_bytes(b"not a database at all " * 200)
    with pytest.raises(PlacementError, match=r"^pool leases .*leases\.db: file is not a database$"):
        Leases(tmp_path, 60)


def test_a_lock_file_planted_as_a_link_is_never_followed(tmp_path):
    """A shared state directory is writable by others: a link in place of leases.db.lock makes no
    file where it points (it was opened for appending, which created the target), and is one line."""
    state, elsewhere = tmp_path / "state", tmp_path / "elsewhere"
    state.mkdir()
    (state / "leases.db.lock").symlink_to(elsewhere)
    with pytest.raises(PlacementError, match=r"^pool leases .*leases\.db: .*"):
        Leases(state, 60)
    assert not elsewhere.exists()


def test_the_lock_file_is_owner_only(tmp_path):
    Leases(tmp_path, 60).close()
    assert (tmp_path / "leases.db.lock").stat().st_mode & 0o777 == 0o600
