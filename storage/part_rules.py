"""The rules a part's contents must follow: its table's schema and the values that could have been written.

- schema (``storage.schemas.TABLES``): every column present (but a column the table gained later,
  ``ADDED_COLUMNS``, which a part written before it lacks), none extra, each of its type; the
  embedding a fixed-size float32 list (its size is the part's ``dim``);
- values (``VALUE_RANGES`` / ``REQUIRED`` / ``ALLOWED_VALUES``): no negative token count, no NaN or inf
  in an embedding, no round below 1, no NULL key, no call mode but live or batch.

:class:`Tally` applies the value rules a batch at a time (so a large part is never held whole) and
keeps what the cross-table checks of :mod:`storage.verify` need of a rounds part: its embedding size
and the highest round of each generation. :meth:`Store.write` applies the same rules before writing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage.schemas import (
    ADDED_COLUMNS,
    ALLOWED_VALUES,
    REQUIRED,
    TABLES,
    VALUE_RANGES,
    feedback_embeddings_schema,
    rounds_schema,
)

_FLOAT_SLACK = 1e-9  # an IS of 1 + 1 ulp is 1

# ---------------------------------------------------------------------------------------------- schema


def embedding_dim(t: pa.DataType) -> int | None:
    """The size of a well-typed embedding column (fixed-size float32 list), else None."""
    if pa.types.is_fixed_size_list(t) and t.value_type == pa.float32() and t.list_size >= 1:
        return t.list_size
    return None


def expected_schema(table: str, actual: pa.Schema | None = None) -> pa.Schema:
    """The schema a part of ``table`` must have; an embedding keeps the part's own size when well typed."""
    schema = TABLES[table]
    if actual is not None and "embedding" in schema.names and "embedding" in actual.names:
        dim = embedding_dim(actual.field("embedding").type)
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
            if f.name not in ADDED_COLUMNS.get(table, {}):  # an added column: the part predates it
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


class Tally:
    """Counts of rule breaks over a part's batches: (column, kind) -> [count, extreme value]; and its summary."""

    def __init__(self, table: str) -> None:
        self.table, self.rows = table, 0
        self.breaks: dict[tuple[str, str], list[Any]] = {}
        self.gens: dict[str, int] = {}
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
        for name, allowed in ALLOWED_VALUES.get(self.table, {}).items():
            if name in data.column_names:
                col = data[name]
                bad = pc.and_(pc.is_valid(col), pc.invert(pc.is_in(col, value_set=pa.array(allowed, col.type))))
                self._add(name, "not allowed", pc.sum(bad).as_py() or 0)
        self.summarise(data)

    def summarise(self, data: pa.Table) -> None:
        if self.table == "rounds" and {"gen_id", "round", "embedding"} <= set(data.column_names):
            self.dim = embedding_dim(data.schema.field("embedding").type)
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
        for name, allowed in ALLOWED_VALUES.get(self.table, {}).items():
            if (name, "not allowed") in self.breaks:
                out.append(f"{name}: {self.breaks[name, 'not allowed'][0]} of {n} values are none of {list(allowed)}")
        return out

    def summary(self) -> dict[str, Any]:
        """What cross-table checks need of a rounds part: its embedding size and max round per gen_id."""
        return {"dim": self.dim, "gens": self.gens} if self.table == "rounds" else {}


def value_problems(table: str, data: pa.Table) -> list[str]:
    """Each rule of ``VALUE_RANGES`` / ``REQUIRED`` the rows break, with counts and an extreme value."""
    tally = Tally(table)
    tally.add(data)
    return tally.problems()


def part_summary(table: str, data: pa.Table) -> dict[str, Any]:
    """What cross-table checks need of a part (a rounds part's embedding size and max round per gen_id)."""
    tally = Tally(table)
    tally.summarise(data)
    return tally.summary()
