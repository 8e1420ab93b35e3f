"""What a training script may call. Standard library only: importing it costs nothing."""

from __future__ import annotations

import json
import math
import os
import time

RANK_VARIABLES = ("TFTRAIN_RANK", "OMPI_COMM_WORLD_RANK", "HOROVOD_RANK", "PMIX_RANK", "PMI_RANK")


def log_metric(name: str, value: float, step: int | None = None) -> None:
    """Record a metric for the current tftrain run (a no-op outside tftrain: prints nothing)."""
    number = float(value)
    record = {"name": str(name), "value": number if math.isfinite(number) else str(number)}
    if step is not None:
        record["step"] = int(step)
    append_record(record)


def append_record(record: dict) -> None:
    """Append one record to this rank's metrics file: a metric point, or a note (an image, a
    tag, the script's own verdict) that tftrain adds to the run's summary."""
    path = os.environ.get("TFTRAIN_METRICS_FILE")
    if not path:
        return
    if "{rank}" in path:  # MPI ranks share one environment: each writes its own file
        rank = next((os.environ[v] for v in RANK_VARIABLES if v in os.environ), "0")
        path = path.replace("{rank}", rank)
    line = (json.dumps({**record, "time": time.time()}) + "\n").encode()
    # One O_APPEND write per record: lines from several threads never interleave.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
