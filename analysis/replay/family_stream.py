"""The rounds the family executor reads, streamed as tables of WHOLE trajectories, read ahead in a thread.

Decoding the rounds' embeddings from Parquet is DuckDB's work (C++, no GIL); computing the families'
signals is Python's. A thread fetches the next batch while the previous one is computed, so the two
overlap on the machine's cores instead of following each other. Sorting the rounds (ORDER BY) would
make DuckDB read the whole store before the first batch, so the stream is read in the store's own order
(every writer of this project writes a trajectory's rounds together and in order) and CHECKED: a
trajectory seen twice, or rounds out of order, raise :class:`Unordered`, and the caller reads the sorted
stream instead (``family_rounds_sorted.sql``). Either way a trajectory's rounds reach the executor
together and in round order, which is all it assumes.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

import duckdb
import numpy as np
import pyarrow as pa

from analysis import sql

_BATCH_ROWS = 1 << 13  # rounds per streamed batch: ~1 400 trajectories (6 rounds), their float64 blocks stay in cache
_DONE = object()


class Unordered(Exception):
    """The store's own order does not keep each trajectory's rounds together and in order."""


def _ahead(reader: pa.RecordBatchReader, depth: int = 2) -> Iterator[pa.RecordBatch]:
    """``reader``'s batches, the next ones fetched by a thread while the caller works on this one."""
    q: queue.Queue[object] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            for batch in reader:
                if not put(batch):
                    return
            put(_DONE)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which raises it
            put(exc)

    thread = threading.Thread(target=work, name="shp-family-rounds", daemon=True)
    thread.start()
    try:
        while True:
            item = q.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item  # type: ignore[misc]
    finally:
        stop.set()
        thread.join()
        reader.close()


def _whole(batches: Iterator[pa.RecordBatch], checked: bool) -> Iterator[pa.Table]:
    """Regroup batches into tables of whole trajectories; ``checked``: raise Unordered unless each
    trajectory's rounds come together and in increasing order."""
    carry: pa.Table | None = None
    seen: set[tuple[str, str]] = set()
    for batch in batches:
        t = pa.Table.from_batches([batch])
        t = t if carry is None else pa.concat_tables([carry, t])
        if t.num_rows == 0:
            continue
        g = t["gen_id"].to_numpy(zero_copy_only=False)
        s = t["scenario_id"].to_numpy(zero_copy_only=False)
        new = np.ones(t.num_rows, dtype=bool)
        new[1:] = (g[1:] != g[:-1]) | (s[1:] != s[:-1])
        starts = np.nonzero(new)[0]
        if checked:
            r = t["round"].to_numpy()
            if np.any((r[1:] <= r[:-1]) & ~new[1:]):
                raise Unordered("rounds out of order within a trajectory")
            keys = list(zip(g[starts].tolist(), s[starts].tolist(), strict=True))
            if len(set(keys)) != len(keys) or not seen.isdisjoint(keys):
                raise Unordered("a trajectory's rounds are not together")
            seen.update(keys[:-1])  # the last one may go on in the next batch
        last = int(starts[-1])
        if last > 0:
            yield t.slice(0, last)
        carry = t.slice(last)
    if carry is not None and carry.num_rows:
        yield carry


def trajectories(con: duckdb.DuckDBPyConnection, dim: int, *, sorted_: bool = False) -> Iterator[pa.Table]:
    """family_rounds as tables of whole trajectories, rounds in order (``sorted_``: ORDER BY, nothing to check)."""
    rounds = sql.query("family_rounds", dim=int(dim))  # per round, in trajectory and round order
    text = sql.query("family_rounds_sorted", rounds=rounds) if sorted_ else rounds
    batches = _ahead(con.sql(text).to_arrow_reader(_BATCH_ROWS))
    try:
        yield from _whole(batches, checked=not sorted_)
    finally:  # release the result at once (a fallback to the sorted stream runs a new query)
        batches.close()
