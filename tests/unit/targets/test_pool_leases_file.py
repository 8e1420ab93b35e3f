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

        def open_and_renew():
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
