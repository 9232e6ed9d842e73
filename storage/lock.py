"""One generation at a time per gen_id on this machine (concurrent multirun jobs share it).

An OS file lock (``fcntl.flock``) under the cache folder: it is released by
the kernel when its holder exits, even after ``kill -9``, so a crashed job
can never wedge the sweep. The second job waits, then finds the trajectories
already stored and generates nothing.
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def generation_lock(cache_dir: str | Path, gen_id: str, timeout_s: float | None = None) -> Iterator[float]:
    """Hold the lock for ``gen_id``; yields how long it waited (seconds)."""
    folder = Path(cache_dir) / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with open(folder / f"{gen_id}.lock", "a+") as fh:
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if timeout_s is not None and time.monotonic() - start > timeout_s:
                    raise TimeoutError(f"generation {gen_id[:12]} locked by another job for > {timeout_s} s") from None
                time.sleep(0.2)
        try:
            yield time.monotonic() - start
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
