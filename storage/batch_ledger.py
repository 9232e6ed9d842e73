"""The batch ledger: every provider batch a run submitted, written before it is first polled.

A batch is paid once, so the ledger is what makes batch mode crash-safe: a rerun after a kill
finds the batches its requests already belong to and polls them again instead of creating
second ones, and it knows which output files it has already taken in.

One SQLite file (WAL, like the response cache) beside the caches, two tables:

- ``batches``: one row per submission -- its key (a hash of the requests it carries, also sent
  as the batch's metadata so a batch created just before a kill is found at the provider), the
  provider's batch id once known, the last status seen, whether its results are taken in.
- ``batch_requests``: which request (custom_id = the response cache key) went into which
  submission, and how many times it has been tried in a batch.

Rows are written with the intent first (key + requests, no id), the id right after the create
call returns, so the only window a kill can hit is closed by looking the key up at the provider.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from storage.cache import open_sqlite, when_free

BATCHES_FILE = "batches.sqlite"
# Statuses after which a batch changes no more (OpenAI's names).
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})

_COLUMNS = "submission, role, batch_id, status, taken, requests, endpoint, key_env"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS batches (
    submission TEXT PRIMARY KEY,
    role TEXT NOT NULL,
    batch_id TEXT,
    status TEXT NOT NULL DEFAULT '',
    taken INTEGER NOT NULL DEFAULT 0,
    requests INTEGER NOT NULL,
    endpoint TEXT NOT NULL DEFAULT '',
    key_env TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS batch_requests (
    custom_id TEXT NOT NULL,
    submission TEXT NOT NULL,
    PRIMARY KEY (custom_id, submission)
);
CREATE INDEX IF NOT EXISTS batch_requests_by_id ON batch_requests (custom_id);
"""


@dataclass(frozen=True)
class BatchRecord:
    submission: str
    role: str  # what the batch carries: "generation" or "judge"
    batch_id: str | None
    status: str
    taken: bool
    requests: int
    endpoint: str = ""  # the provider's base URL, no user info or query (where to cancel it)
    key_env: str = ""  # the NAME of the variable holding its key

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


def _record(row: tuple | list) -> BatchRecord:
    return BatchRecord(row[0], row[1], row[2], row[3], bool(row[4]), row[5], row[6], row[7])


class BatchLedger:
    """The ledger of one cache folder; safe for the threads of one process."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn = open_sqlite(self.path)
        when_free(lambda: self._conn.executescript(_SCHEMA))

    def intend(
        self, submission: str, role: str, custom_ids: list[str], *, endpoint: str = "", key_env: str = ""
    ) -> None:
        """Record a submission's requests before the batch is created (idempotent)."""
        now = time.time()
        with self._lock, self._conn:
            self._conn.execute("BEGIN IMMEDIATE")
            # A voided intent (never created) with the same key is live again: this time it is sent.
            self._conn.execute(
                "INSERT INTO batches (submission, role, requests, endpoint, key_env, created, updated) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (submission) DO UPDATE SET taken = 0, status = '', updated = excluded.updated "
                "WHERE batches.status = 'void'",
                (submission, role, len(custom_ids), endpoint, key_env, now, now),
            )
            self._conn.executemany(
                "INSERT OR IGNORE INTO batch_requests (custom_id, submission) VALUES (?, ?)",
                [(cid, submission) for cid in custom_ids],
            )

    def created(self, submission: str, batch_id: str, status: str) -> None:
        self._update(submission, "batch_id = ?, status = ?", (batch_id, status))

    def seen(self, submission: str, status: str) -> None:
        self._update(submission, "status = ?", (status,))

    def taken(self, submission: str) -> None:
        """The batch's output and error files are in: its results are in the response cache."""
        self._update(submission, "taken = 1", ())

    def void(self, submission: str) -> None:
        """An intent whose batch was never created (the run stopped before the create call)."""
        self._update(submission, "taken = 1, status = 'void'", ())

    def _update(self, submission: str, assignment: str, values: tuple[object, ...]) -> None:
        with self._lock:
            self._conn.execute(
                f"UPDATE batches SET {assignment}, updated = ? WHERE submission = ?", (*values, time.time(), submission)
            )

    def get(self, submission: str) -> BatchRecord | None:
        with self._lock:
            row = self._conn.execute(f"SELECT {_COLUMNS} FROM batches WHERE submission = ?", (submission,)).fetchone()
        return None if row is None else _record(row)

    def holding(self, custom_ids: list[str]) -> dict[str, BatchRecord]:
        """custom_id -> the not-yet-taken batch that may still deliver it (the newest wins).

        Any status counts: an expired or cancelled batch still has an output file with the lines
        it finished, and those are paid for -- they are taken in before anything is sent again.
        """
        out: dict[str, BatchRecord] = {}
        with self._lock:
            for i in range(0, len(custom_ids), 500):
                chunk = custom_ids[i : i + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._conn.execute(
                    f"SELECT r.custom_id, {_COLUMNS} FROM batch_requests r JOIN batches b USING (submission) "
                    f"WHERE r.custom_id IN ({marks}) AND b.taken = 0 ORDER BY b.created",
                    chunk,
                ).fetchall()
                for cid, *rec in rows:
                    out[cid] = _record(rec)
        return out

    def tries(self, custom_id: str) -> int:
        """How many batches this request was sent in (intents never created do not count)."""
        with self._lock:
            row = self._conn.execute(
                "SELECT count(*) FROM batch_requests r JOIN batches b USING (submission) "
                "WHERE r.custom_id = ? AND b.batch_id IS NOT NULL",
                (custom_id,),
            ).fetchone()
        return int(row[0])

    def unfinished(self) -> list[BatchRecord]:
        """Batches not yet taken in (a run stopped while they were at the provider)."""
        with self._lock:
            rows = self._conn.execute(f"SELECT {_COLUMNS} FROM batches WHERE taken = 0 ORDER BY created").fetchall()
        return [_record(r) for r in rows]

    def all(self) -> list[BatchRecord]:
        with self._lock:
            rows = self._conn.execute(f"SELECT {_COLUMNS} FROM batches ORDER BY created").fetchall()
        return [_record(r) for r in rows]

    def close(self) -> None:
        with self._lock:
            self._conn.close()
