"""One part checked from its bytes, read once: content hash, Parquet structure, schema, page CRCs, values.

A part named ``part-<time>-<uuid>.sha256-<hash>.parquet`` (every part :meth:`Store.write` writes)
must hash to ``<hash>`` -- every byte, footer included -- and every data page's CRC32 must match
(Parquet page checksums, verified while decoding). It must be a whole Parquet file (not zero bytes,
not truncated: ``PAR1`` at both ends, a footer that parses) and follow :mod:`storage.part_rules`.
Parts written before hashes existed (``part-<time>-<uuid>.parquet``) get all but the hash check
(:data:`NO_CHECKSUM`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from storage.part_rules import Tally, schema_problems
from storage.parts import HASH_HEX, Store, part_digest

NO_CHECKSUM = "none (written before checksums: schema and value checks only)"
_BATCH_ROWS = 8192  # rows decoded at a time while verifying


@dataclass(frozen=True)
class PartCheck:
    """What verifying one part found. ``problems`` empty = sound."""

    table: str
    path: str
    problems: tuple[str, ...] = ()
    checksum: str = ""  # "sha256 ok" | "sha256 MISMATCH" | NO_CHECKSUM | "" (not reached)
    rows: int | None = None
    cached: bool = False  # sound by the record of an earlier verification (size and mtime unchanged)
    summary: dict[str, Any] = field(default_factory=dict)  # rounds: {"dim": d, "gens": {gen_id: max round}}

    @property
    def ok(self) -> bool:
        return not self.problems


def one_line(text: object, limit: int = 240) -> str:
    """An error message on one line, cut to ``limit`` characters (a part's problem is said in one line)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def check_part(store: Store, table: str, path: str) -> PartCheck:
    """Verify one part from its bytes (read once): hash, structure, schema, page CRCs, values."""
    try:
        with store.fs.open_input_file(path) as fh:
            buf = fh.read_buffer()
    except FileNotFoundError:
        raise
    except OSError as exc:
        return PartCheck(table, path, (f"cannot be read: {one_line(exc)}",))
    size = buf.size
    problems: list[str] = []
    digest = part_digest(path)
    checksum = NO_CHECKSUM
    if size == 0:
        return PartCheck(
            table,
            path,
            ("zero bytes (an empty file, not a Parquet part)",),
            "sha256 MISMATCH" if digest else checksum,
            0,
        )
    if digest is not None:
        got = hashlib.sha256(buf).hexdigest()[:HASH_HEX]
        checksum = "sha256 ok" if got == digest else "sha256 MISMATCH"
        if got != digest:
            problems.append(
                "content hash mismatch: its bytes changed after it was written "
                f"(sha256 {got[:12]}..., its name says {digest[:12]}...)"
            )
    head_ok = size >= 4 and buf.slice(0, 4).to_pybytes() == b"PAR1"
    if size < 12 or not head_ok or buf.slice(size - 4).to_pybytes() != b"PAR1":
        where = "its end (truncated?)" if head_ok else "its start"
        problems.append(f"not a whole Parquet file: {size} bytes, no PAR1 magic at {where}")
        return PartCheck(table, path, tuple(problems), checksum, None)
    try:
        pf = pq.ParquetFile(pa.BufferReader(buf), page_checksum_verification=True)
        schema = pf.schema_arrow
    except Exception as exc:  # noqa: BLE001 - any parse failure is the part's damage, said in one line
        problems.append(f"unreadable Parquet footer: {one_line(exc)}")
        return PartCheck(table, path, tuple(problems), checksum, None)
    rows = pf.metadata.num_rows
    bad_schema = schema_problems(table, schema)
    if bad_schema:
        return PartCheck(table, path, tuple(problems + bad_schema), checksum, rows)
    tally = Tally(table)
    try:  # every page of every column decoded (its CRC checked), a batch at a time: memory ~ part size
        for batch in pf.iter_batches(batch_size=_BATCH_ROWS, use_threads=False):
            tally.add(pa.Table.from_batches([batch]))
    except Exception as exc:  # noqa: BLE001
        why = "data page checksum mismatch (corrupt page)" if "CRC" in str(exc) else "undecodable data"
        problems.append(f"{why}: {one_line(exc)}")
        return PartCheck(table, path, tuple(problems), checksum, rows)
    if tally.rows != rows:
        problems.append(f"footer says {rows} rows, pages hold {tally.rows}")
    problems += tally.problems()
    return PartCheck(table, path, tuple(problems), checksum, tally.rows, summary=tally.summary())
