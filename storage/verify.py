"""Parts are checked before they are believed; damaged ones are named, refused, and can be moved aside.

A part is *sound* when

1. its bytes are those written: a part named ``part-<time>-<uuid>.sha256-<hash>.parquet`` (every part
   :meth:`Store.write` writes) must hash to ``<hash>`` -- every byte, footer included -- and every data
   page's CRC32 must match (Parquet page checksums, verified while decoding);
2. it is a whole Parquet file (not zero bytes, not truncated: ``PAR1`` at both ends, a footer that parses);
3. its schema is its table's (``storage.schemas.TABLES``): every column present, none extra, each of
   its type; the embedding a fixed-size float32 list (its size is the part's ``dim``);
4. its values could have been written (``VALUE_RANGES`` / ``REQUIRED``: no negative token count, no
   NaN or inf in an embedding, no round below 1 or above its generation's ``max_rounds``, no NULL key),
   and its embedding size is the one its generation (``generations.embedding_dim``) records.

Parts written before hashes existed (``part-<time>-<uuid>.parquet``) get checks 2-4 only; ``--verify``
says so for each ("no checksum"). A damaged part is never half-used: :func:`require_sound` (called by
``analysis.connect`` and by every sweep job before it reads the store) refuses the whole store and
names each damaged part and why. :func:`quarantine` (``shp-query --store S --quarantine``) moves
damaged parts to ``<root>/_quarantine/<table>/`` (a folder no reader globs), each with a
``.reason.txt`` beside it; the store is readable again, and a rerun of the sweep regenerates exactly
the trajectories that were lost (``storage.resume.done_scenarios`` no longer sees them; the response
cache means no paid call is repeated).

Verification reads a part once: a sound part is recorded by (path, size, mtime) in
``<cache dir>/verified-parts.jsonl`` (``<root>/_cache`` for a local store) and is not read again
until one of them changes; :meth:`Store.write` records the parts it writes (their values were checked
before writing, their hash taken while writing). ``--verify --recheck`` ignores the record (a flip by
the disk itself changes neither size nor mtime).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from storage.cache import default_cache_dir
from storage.parts import HASH_HEX, Store, _redact_uri, part_digest
from storage.schemas import REQUIRED, TABLES, VALUE_RANGES, feedback_embeddings_schema, rounds_schema

CHECKS_VERSION = 1  # bump when the checks change: every recorded verification is then redone
VERIFIED_FILE = "verified-parts.jsonl"
QUARANTINE_DIR = "_quarantine"
REASON_SUFFIX = ".reason.txt"
NO_CHECKSUM = "none (written before checksums: schema and value checks only)"
_FLOAT_SLACK = 1e-9  # an IS of 1 + 1 ulp is 1
_MAX_SHOWN = 10
_BATCH_ROWS = 8192  # rows decoded at a time while verifying


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


@dataclass(frozen=True)
class Quarantined:
    table: str
    source: str
    dest: str
    problems: tuple[str, ...]
    restores: str  # what a rerun does about what was lost


def shown(store: Store) -> str:
    """The store root as printed: a URI's credentials (``s3://KEY:SECRET@...``) redacted."""
    return store.uri if store.local else _redact_uri(store.uri)


def display(store: Store, path: str) -> str:
    """``<store root>/<table>/<part>`` for a path the store's filesystem lists."""
    rel = path[len(store.path) :].lstrip("/") if path.startswith(store.path) else path
    return f"{shown(store)}/{rel}"


def _one_line(text: object, limit: int = 240) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


# ---------------------------------------------------------------------------------------------- schema


def _embedding_dim(t: pa.DataType) -> int | None:
    if pa.types.is_fixed_size_list(t) and t.value_type == pa.float32() and t.list_size >= 1:
        return t.list_size
    return None


def expected_schema(table: str, actual: pa.Schema | None = None) -> pa.Schema:
    """The schema a part of ``table`` must have; an embedding keeps the part's own size when well typed."""
    schema = TABLES[table]
    if actual is not None and "embedding" in schema.names and "embedding" in actual.names:
        dim = _embedding_dim(actual.field("embedding").type)
        if dim is not None:
            return rounds_schema(dim) if table == "rounds" else feedback_embeddings_schema(dim)
    return schema


def schema_problems(table: str, actual: pa.Schema) -> list[str]:
    """Each way ``actual`` differs from the table's schema: missing, extra or mistyped columns."""
    want = expected_schema(table, actual)
    have = {f.name: f.type for f in actual}
    out = []
    for f in want:
        if f.name not in have:
            out.append(f"missing column {f.name} ({f.type})")
        elif not have[f.name].equals(f.type):
            out.append(f"column {f.name} is {have[f.name]}, expected {f.type}")
    extra = [n for n in actual.names if n not in want.names]
    if extra:
        out.append(f"unexpected column{'s' if len(extra) > 1 else ''} {', '.join(extra)}")
    return out


# ---------------------------------------------------------------------------------------------- values


def _rows_not_finite(col: pa.ChunkedArray) -> int:
    """Rows of a fixed-size float list column holding a NaN, an inf or a NULL element."""
    bad = 0
    for chunk in col.chunks:
        if len(chunk) == 0:
            continue
        dim = chunk.type.list_size
        flat = chunk.flatten()  # respects the chunk's offset; NULL rows are skipped (REQUIRED counts them)
        values = flat.to_numpy(zero_copy_only=False)
        if flat.null_count:
            values = np.where(np.asarray(flat.is_null()), np.nan, values)
        rows = values.reshape(-1, dim)
        bad += int((~np.isfinite(rows)).any(axis=1).sum())
    return bad


class _Tally:
    """Counts of rule breaks over a part's batches: (column, kind) -> [count, extreme value]; and its summary."""

    def __init__(self, table: str) -> None:
        self.table, self.rows, self.breaks, self.gens = table, 0, {}, {}
        self.dim: int | None = None

    def _add(self, name: str, kind: str, count: int, extreme: object = None, pick: Any = min) -> None:
        if not count:
            return
        seen = self.breaks.setdefault((name, kind), [0, extreme])
        seen[0] += count
        if extreme is not None and seen[1] is not None:
            seen[1] = pick(seen[1], extreme)

    def add(self, data: pa.Table) -> None:
        self.rows += data.num_rows
        for name in REQUIRED.get(self.table, ()):
            if name in data.column_names:
                self._add(name, "NULL", data[name].null_count)
        for name, (lo, hi, nan_ok) in VALUE_RANGES.get(self.table, {}).items():
            if name not in data.column_names:
                continue
            col = data[name]
            if pa.types.is_fixed_size_list(col.type):
                self._add(name, "not finite", _rows_not_finite(col))
                continue
            floating = pa.types.is_floating(col.type)
            if floating:
                if not nan_ok:
                    self._add(name, "NaN", pc.sum(pc.is_nan(col)).as_py() or 0)
                self._add(name, "inf", pc.sum(pc.is_inf(col)).as_py() or 0)
                col = pc.filter(col, pc.is_finite(col))
            slack = _FLOAT_SLACK if floating else 0
            if lo is not None:
                self._add(name, "below", pc.sum(pc.less(col, lo - slack)).as_py() or 0, pc.min(col).as_py(), min)
            if hi is not None:
                self._add(name, "above", pc.sum(pc.greater(col, hi + slack)).as_py() or 0, pc.max(col).as_py(), max)
        self.summarise(data)

    def summarise(self, data: pa.Table) -> None:
        if self.table == "rounds" and {"gen_id", "round", "embedding"} <= set(data.column_names):
            self.dim = _embedding_dim(data.schema.field("embedding").type)
            groups = data.select(["gen_id", "round"]).group_by("gen_id").aggregate([("round", "max")])
            for g, top in zip(groups["gen_id"].to_pylist(), groups["round_max"].to_pylist(), strict=True):
                if g is not None and top is not None:
                    self.gens[g] = max(top, self.gens.get(g, top))

    def problems(self) -> list[str]:
        n, out = self.rows, []
        for name in REQUIRED.get(self.table, ()):
            if (name, "NULL") in self.breaks:
                out.append(f"{name}: {self.breaks[name, 'NULL'][0]} of {n} values are NULL")
        for name, (lo, hi, _) in VALUE_RANGES.get(self.table, {}).items():
            b = self.breaks
            if (name, "not finite") in b:
                out.append(f"{name}: {b[name, 'not finite'][0]} of {n} rows hold NaN or inf")
            out += [f"{name}: {b[name, k][0]} of {n} values are {k}" for k in ("NaN", "inf") if (name, k) in b]
            if (name, "below") in b:
                out.append(f"{name}: {b[name, 'below'][0]} of {n} values below {lo} (min {b[name, 'below'][1]})")
            if (name, "above") in b:
                out.append(f"{name}: {b[name, 'above'][0]} of {n} values above {hi} (max {b[name, 'above'][1]})")
        return out

    def summary(self) -> dict[str, Any]:
        """What cross-table checks need of a rounds part: its embedding size and max round per gen_id."""
        return {"dim": self.dim, "gens": self.gens} if self.table == "rounds" else {}


def value_problems(table: str, data: pa.Table) -> list[str]:
    """Each rule of ``VALUE_RANGES`` / ``REQUIRED`` the rows break, with counts and an extreme value."""
    tally = _Tally(table)
    tally.add(data)
    return tally.problems()


def part_summary(table: str, data: pa.Table) -> dict[str, Any]:
    """What cross-table checks need of a part (a rounds part's embedding size and max round per gen_id)."""
    tally = _Tally(table)
    tally.summarise(data)
    return tally.summary()


# ---------------------------------------------------------------------------------------------- one part


def check_part(store: Store, table: str, path: str) -> PartCheck:
    """Verify one part from its bytes (read once): hash, structure, schema, page CRCs, values."""
    try:
        with store.fs.open_input_file(path) as fh:
            buf = fh.read_buffer()
    except FileNotFoundError:
        raise
    except OSError as exc:
        return PartCheck(table, path, (f"cannot be read: {_one_line(exc)}",))
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
        problems.append(f"unreadable Parquet footer: {_one_line(exc)}")
        return PartCheck(table, path, tuple(problems), checksum, None)
    rows = pf.metadata.num_rows
    bad_schema = schema_problems(table, schema)
    if bad_schema:
        return PartCheck(table, path, tuple(problems + bad_schema), checksum, rows)
    tally = _Tally(table)
    try:  # every page of every column decoded (its CRC checked), a batch at a time: memory ~ part size
        for batch in pf.iter_batches(batch_size=_BATCH_ROWS, use_threads=False):
            tally.add(pa.Table.from_batches([batch]))
    except Exception as exc:  # noqa: BLE001
        why = "data page checksum mismatch (corrupt page)" if "CRC" in str(exc) else "undecodable data"
        problems.append(f"{why}: {_one_line(exc)}")
        return PartCheck(table, path, tuple(problems), checksum, rows)
    if tally.rows != rows:
        problems.append(f"footer says {rows} rows, pages hold {tally.rows}")
    problems += tally.problems()
    return PartCheck(table, path, tuple(problems), checksum, tally.rows, summary=tally.summary())


# ---------------------------------------------------------------------------------------------- record


def _cache_key(store: Store, path: str) -> str:
    return f"{store.fs.type_name}:{path}"


def _cache_file(store: Store) -> Path:
    return default_cache_dir(store.uri) / VERIFIED_FILE


def _load_record(store: Store) -> tuple[dict[str, dict[str, Any]], int]:
    """Recorded sound parts (last line per part wins) and the number of lines read."""
    try:
        text = _cache_file(store).read_text()
    except OSError:
        return {}, 0
    out: dict[str, dict[str, Any]] = {}
    lines = text.splitlines()
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a torn line of a concurrent writer: that part is simply verified again
        if isinstance(entry, dict) and entry.get("v") == CHECKS_VERSION and "key" in entry:
            out[entry["key"]] = entry
    return out, len(lines)


def _append_record(store: Store, entries: Iterable[dict[str, Any]]) -> None:
    """Append lines in one ``write`` (O_APPEND: concurrent jobs do not interleave); best effort."""
    data = "".join(json.dumps(e, sort_keys=True) + "\n" for e in entries).encode()
    if not data:
        return
    path = _cache_file(store)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
    except OSError:
        pass  # a read-only store: verification is simply not remembered


def _rewrite_record(store: Store, live: dict[str, dict[str, Any]]) -> None:
    path = _cache_file(store)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.partial")
    try:
        tmp.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in live.values()))
        tmp.replace(path)
    except OSError:
        tmp.unlink(missing_ok=True)


def _entry(store: Store, table: str, info: pafs.FileInfo, rows: int | None, checksum: str, summary: dict) -> dict:
    return {
        "v": CHECKS_VERSION,
        "key": _cache_key(store, info.path),
        "table": table,
        "size": info.size,
        "mtime_ns": info.mtime_ns,
        "rows": rows,
        "checksum": checksum,
        "summary": summary,
    }


def record_written(store: Store, table: str, path: str, data: pa.Table) -> None:
    """Record a part :meth:`Store.write` just wrote as verified (values checked, hash taken as written)."""
    if table not in TABLES:
        return
    try:
        info = store.fs.get_file_info(path)
        _append_record(store, [_entry(store, table, info, data.num_rows, "sha256 ok", part_summary(table, data))])
    except Exception:  # noqa: BLE001 - best effort: an unrecorded part is verified by its first reader
        pass


# ---------------------------------------------------------------------------------------------- store


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
    store: Store, tables: Iterable[str] | None = None, *, use_record: bool = True, remember: bool = True
) -> list[PartCheck]:
    """Check every part of ``tables`` (default: all); parts recorded as sound and unchanged are not read.

    ``use_record=False`` reads every part again (``--recheck``); ``remember`` records newly verified
    sound parts. Parts that vanish while checked (a compaction finishing) are left out.
    """
    every = tables is None
    tables = [t for t in (tables or TABLES) if t in TABLES]
    record, lines = _load_record(store) if use_record else ({}, 0)
    checks: list[PartCheck] = []
    new: list[dict[str, Any]] = []
    live: dict[str, dict[str, Any]] = {}
    for table in tables:
        for info in store.fs.get_file_info(store.parts(table)):
            if info.type != pafs.FileType.File:
                continue  # gone between the listing and the stat
            key = _cache_key(store, info.path)
            seen = record.get(key)
            if seen and seen["table"] == table and seen["size"] == info.size and seen["mtime_ns"] == info.mtime_ns:
                live[key] = seen
                checks.append(PartCheck(table, info.path, (), seen["checksum"], seen["rows"], True, seen["summary"]))
                continue
            try:
                c = check_part(store, table, info.path)
            except FileNotFoundError:
                continue
            checks.append(c)
            if c.ok:
                live[key] = _entry(store, table, info, c.rows, c.checksum, c.summary)
                new.append(live[key])
    checks = _cross_check(store, checks)
    if remember and use_record and every and store.local and lines > 2 * len(live) + 256:
        _rewrite_record(store, live)  # drop the lines of parts long gone (compacted, quarantined)
    elif remember:
        _append_record(store, new)
    return checks


def require_sound(store: Store, tables: Iterable[str] | None = None) -> list[PartCheck]:
    """The checks of every part, or :class:`DamagedStore` naming each damaged one."""
    checks = verify_store(store, tables)
    damaged = [c for c in checks if not c.ok]
    if damaged:
        raise DamagedStore(store, damaged)
    return checks


# ---------------------------------------------------------------------------------------------- quarantine


def _lost(store: Store, table: str, path: str, rows: int | None) -> str:
    """What a rerun of the sweep does about the rows of a quarantined part (read what can be read)."""
    held = f"{rows} rows" if rows is not None else "rows that cannot be counted"
    if table == "rounds":
        try:
            t = pq.read_table(path, columns=["gen_id", "scenario_id"], filesystem=store.fs)
            pairs = sorted(set(zip(t["gen_id"].to_pylist(), t["scenario_id"].to_pylist(), strict=True)))
        except Exception:  # noqa: BLE001 - the part is damaged: say what is known
            return (
                f"{held} of trajectories that cannot be read back: a rerun of the sweep regenerates the "
                "trajectories its scenarios lack (the response cache repays no call)"
            )
        ids = ", ".join(s for _, s in pairs[:8]) + (", ..." if len(pairs) > 8 else "")
        gens = ", ".join(sorted({g if len(g) <= 20 else g[:12] + "..." for g, _ in pairs}))
        return (
            f"{len(pairs)} trajectories of generation {gens} ({ids}): a rerun of the sweep regenerates "
            "exactly them (the response cache repays no call)"
        )
    return {
        "judgments": f"{held}: a rerun of the sweep judges those drafts again (the judge cache repays no call)",
        "feedback_embeddings": f"{held}: a rerun of the sweep embeds those critiques again (locally, no paid call)",
        "scenarios": f"{held}: rewritten only when their trajectories are generated again",
        "generations": f"{held}: rewritten only when their generation runs again",
        "failures": f"{held} of failure history (not regenerated; a rerun records its own)",
        "manifests": f"{held} of run history (not regenerated; a rerun records its own)",
        "results": f"{held} of earlier jobs' results (not regenerated; a rerun writes its own)",
    }.get(table, held)


def _write_text(store: Store, path: str, text: str) -> None:
    with store.fs.open_output_stream(path) as out:
        out.write(text.encode())


def quarantine(store: Store, checks: Sequence[PartCheck] | None = None, *, recheck: bool = False) -> list[Quarantined]:
    """Move every damaged part to ``<root>/_quarantine/<table>/`` (one rename each), a reason file beside it."""
    checks = verify_store(store, use_record=not recheck) if checks is None else checks
    moved = []
    for c in checks:
        if c.ok:
            continue
        folder = f"{store.path}/{QUARANTINE_DIR}/{c.table}"
        store.fs.create_dir(folder, recursive=True)
        base = c.path.rsplit("/", 1)[-1]
        dest, n = f"{folder}/{base}", 1
        while store.fs.get_file_info(dest).type != pafs.FileType.NotFound:
            dest, n = f"{folder}/{base}.{n}", n + 1
        restores = _lost(store, c.table, c.path, c.rows)
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        reason = (
            f"quarantined {when} by storage.verify (shp-query --quarantine)\n"
            f"table: {c.table}\nfrom: {display(store, c.path)}\nchecksum: {c.checksum or '-'}\n"
            + "".join(f"problem: {p}\n" for p in c.problems)
            + f"lost: {restores}\n"
        )
        _write_text(store, dest + REASON_SUFFIX, reason)  # first: a part in quarantine always has its reason
        store.fs.move(c.path, dest)  # a rename: the part leaves the table folder in one step
        moved.append(Quarantined(c.table, c.path, dest, c.problems, restores))
    return moved


# ---------------------------------------------------------------------------------------------- CLI


def _status(c: PartCheck) -> str:
    return "ok" if c.ok else "DAMAGED"


def cli(root: str, *, do_quarantine: bool = False, recheck: bool = False, out: TextIO | None = None) -> int:
    """``shp-query --store S --verify`` (exit 1 if a part is damaged) / ``--quarantine`` (exit 0 once repaired)."""
    out = out or sys.stdout
    store = Store(root)
    if store.local and not Path(store.path).is_dir():
        print(f"shp-query: no store at {store.path} (expected <root>/<table>/part-*.parquet)", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    checks = verify_store(store, use_record=not recheck)
    took = time.perf_counter() - t0
    damaged = [c for c in checks if not c.ok]
    if not do_quarantine or not damaged:
        for c in checks:
            if not c.ok or c.checksum == NO_CHECKSUM:
                said = "; ".join(c.problems) if c.problems else "schema and values ok"
                print(
                    f"{_status(c):7} {display(store, c.path)} [{c.rows if c.rows is not None else '?'} rows, "
                    f"checksum: {c.checksum or '-'}]: {said}",
                    file=out,
                )
        unhashed = sum(c.checksum == NO_CHECKSUM for c in checks)
        print(
            f"{len(checks)} parts checked in {took:.2f} s ({sum(c.cached for c in checks)} unchanged since verified, "
            f"not read again); {len(damaged)} damaged; {unhashed} without a checksum "
            "(written before checksums: schema and value checks only)",
            file=out,
        )
    if do_quarantine:
        if not damaged:
            print("nothing to quarantine: every part is sound", file=out)
            return 0
        for q in quarantine(store, checks):
            print(
                f"moved   {display(store, q.source)}\n     -> {display(store, q.dest)}\n"
                f"     why: {'; '.join(q.problems)}\n     lost: {q.restores}",
                file=out,
            )
        left = [c for c in verify_store(store) if not c.ok]
        if left:
            print(f"{len(left)} parts are still damaged (moved by another process?): run --verify", file=out)
            return 1
        print(
            f"{len(damaged)} part{'s' if len(damaged) != 1 else ''} moved to {shown(store)}/{QUARANTINE_DIR}/; "
            "the store is readable again. Rerun the same sweep to regenerate what was lost.",
            file=out,
        )
        return 0
    if damaged:
        print(f"repair: shp-query --store {shown(store)} --quarantine", file=out)
        return 1
    return 0
