"""Parts are checked before they are believed; damaged ones are named and refused.

A part is *sound* when

1. its bytes are those written: its content hash (when its name carries one) and every data page's
   CRC32 match; it is a whole Parquet file (:mod:`storage.part_check`);
2. its schema is its table's and its values could have been written (:mod:`storage.part_rules`);
3. it agrees with its generation (checked here, across tables): no round above the generation's
   ``max_rounds``, and the embedding size the generation (``generations.embedding_dim``) records;
4. a part derived from others (``trajectory_inputs``) is what those parts give (:mod:`storage.inputs_check`).

Parts written before hashes existed (``part-<time>-<uuid>.parquet``) get every check but the hash;
``--verify`` says so for each ("no checksum"). A damaged part is never half-used: :func:`require_sound`
(called by ``analysis.connect`` and by every sweep job before it reads the store) refuses the whole
store and names each damaged part and why. :mod:`storage.quarantine` moves damaged parts aside, after
which a rerun of the sweep regenerates exactly what was lost; :mod:`storage.verify_cli` is
``shp-query --verify`` / ``--quarantine``.

Verification reads a part once: sound parts are recorded (:mod:`storage.verified_record`) and not
read again until their size or mtime changes -- if this reader can authenticate the record's line (else the part is
verified again).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import pyarrow.parquet as pq

from shp_ray.redaction import redact_text
from storage.inputs_check import InputsSources, check_inputs
from storage.part_check import NO_CHECKSUM, PartCheck, check_part
from storage.parts import Store
from storage.schemas import TABLES
from storage.verified_record import append_record, load_record, record_entry, record_key, rewrite_record, unchanged

__all__ = [
    "NO_CHECKSUM",
    "DamagedStore",
    "PartCheck",
    "check_part",
    "display",
    "require_sound",
    "shown",
    "verify_store",
]

_MAX_SHOWN = 10


def shown(store: Store) -> str:
    """The store root as printed: a URI's credentials (``s3://KEY:SECRET@...``) redacted."""
    return store.uri if store.local else redact_text(store.uri)


def display(store: Store, path: str) -> str:
    """``<store root>/<table>/<part>`` for a path the store's filesystem lists."""
    rel = path[len(store.path) :].lstrip("/") if path.startswith(store.path) else path
    return f"{shown(store)}/{rel}"


class DamagedStore(ValueError):
    """Parts that cannot be believed: names each (table, path) and why, and how to repair the store."""

    def __init__(self, store: Store, damaged: Sequence[PartCheck]) -> None:
        self.store, self.damaged = store, list(damaged)
        lines = [f"  {display(store, c.path)}: {'; '.join(c.problems)}" for c in self.damaged[:_MAX_SHOWN]]
        if len(self.damaged) > _MAX_SHOWN:
            lines.append(f"  ... and {len(self.damaged) - _MAX_SHOWN} more (shp-query --store {shown(store)} --verify)")
        n = len(self.damaged)
        super().__init__(
            f"store {shown(store)}: {n} damaged part{'s' if n != 1 else ''}, so nothing was computed from it:\n"
            + "\n".join(lines)
            + f"\nMove {'them' if n != 1 else 'it'} aside with: shp-query --store {shown(store)} --quarantine"
            " (then rerun the sweep: it regenerates exactly what was lost)"
        )


def _generation_limits(store: Store, checks: list[PartCheck]) -> dict[str, tuple[int, int]]:
    """gen_id -> (max_rounds, embedding_dim) from the sound generations parts."""
    out: dict[str, tuple[int, int]] = {}
    for c in checks:
        if c.table == "generations" and c.ok:
            try:
                with store.fs.open_input_file(c.path) as fh:  # (pq.read_table would import pyarrow.dataset: 0.4 s)
                    t = pq.ParquetFile(fh).read(columns=["gen_id", "max_rounds", "embedding_dim"])
            except Exception:  # noqa: BLE001 - changed since recorded (or gone): --recheck names it
                continue
            for g, m, d in zip(*(t[n].to_pylist() for n in t.column_names), strict=True):
                out.setdefault(g, (m, d))
    return out


def _cross_check(store: Store, checks: list[PartCheck]) -> list[PartCheck]:
    """A rounds part's rounds must not exceed, and its embedding size must equal, its generation's."""
    limits = _generation_limits(store, checks)
    out = []
    for c in checks:
        if c.table == "rounds" and c.summary:
            extra = []
            for gen, top in sorted(c.summary.get("gens", {}).items()):
                if gen not in limits:
                    continue
                max_rounds, dim = limits[gen]
                if top > max_rounds:
                    extra.append(
                        f"round: values up to {top} for gen_id {gen[:16]}, whose generation has max_rounds {max_rounds}"
                    )
                if c.summary.get("dim") != dim:
                    extra.append(
                        f"embedding size {c.summary.get('dim')}, but generation {gen[:16]} records embedding_dim {dim}"
                    )
            if extra:
                c = replace(c, problems=c.problems + tuple(extra))
        out.append(c)
    return out


def verify_store(
    store: Store,
    tables: Iterable[str] | None = None,
    *,
    use_record: bool = True,
    remember: bool = True,
    writer: bool = False,
) -> list[PartCheck]:
    """Check every part of ``tables`` (default: all); parts recorded as sound and unchanged are not read.

    ``use_record=False`` reads every part again (``--recheck``); ``remember`` records newly verified
    sound parts (in this reader's record, never the store's). ``writer``: the caller is the generation writer,
    which may also shorten its own record in the store. Parts that vanish while checked (a compaction
    finishing) are left out.
    """
    every = tables is None
    tables = [t for t in (tables or TABLES) if t in TABLES]
    record, lines, writer_lines = load_record(store) if use_record else ({}, 0, 0)
    checks: list[PartCheck] = []
    new: list[dict[str, Any]] = []
    live: dict[str, dict[str, Any]] = {}
    sources = InputsSources(store)  # what a trajectory_inputs part derives from, listed once if one is checked
    for table in tables:
        for info in store.part_infos(table):  # size and mtime as listed: no request per part
            key = record_key(store, info.path)
            seen = record.get(key)
            if seen and unchanged(store, seen, info) and seen["table"] == table:
                live[key] = seen
                checks.append(PartCheck(table, info.path, (), seen["checksum"], seen["rows"], True, seen["summary"]))
                continue
            try:
                c = check_part(store, table, info.path)
                if c.ok and (derived := check_inputs(sources, table, info.path)):
                    c = replace(c, problems=tuple(derived))
            except FileNotFoundError:
                continue
            checks.append(c)
            if c.ok:
                live[key] = record_entry(store, table, info, c.rows, c.checksum, c.summary)
                new.append(live[key])
    checks = _cross_check(store, checks)
    if remember and use_record and every and lines > 2 * len(live) + 256:
        rewrite_record(store, live)  # drop the lines of parts long gone (compacted, quarantined)
    elif remember:
        append_record(store, new)
    if writer and use_record and every and writer_lines > 2 * len(live) + 256:
        rewrite_record(store, live, writer=True)
    return checks


def require_sound(store: Store, tables: Iterable[str] | None = None, *, writer: bool = False) -> list[PartCheck]:
    """The checks of every part, or :class:`DamagedStore` naming each damaged one (``writer``: verify_store)."""
    checks = verify_store(store, tables, writer=writer)
    damaged = [c for c in checks if not c.ok]
    if damaged:
        raise DamagedStore(store, damaged)
    return checks
