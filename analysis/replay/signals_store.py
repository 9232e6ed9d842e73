"""The store's ``signals`` table: build it from the rounds (where missing) and prove it equal to them.

    shp-query --store runs/store --signals rebuild   # store the signals of trajectories that lack them
    shp-query --store runs/store --signals check     # recompute every stored signal; exit 1 on a difference

The generation writes each trajectory's signals right after its rounds
(:func:`shp_ray.policy.round_signals.trajectory_signals`); a store written before the table existed,
or a run killed between the two parts, has trajectories without them, which every connection then
recomputes from the embeddings. ``rebuild`` stores them once, with the SAME function, so rebuilt and
generated values are equal bit for bit; ``check`` recomputes each stored row and compares.

One rounds part at a time (bounded memory): a part holds whole trajectories (every writer of this
project writes whole trajectories; compaction merges whole parts).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analysis import sql
from analysis.errors import AnalysisError, require_sound
from analysis.replay.sandbox import new_connection
from shp_ray.policy.cascade import APPROVAL
from shp_ray.policy.round_signals import SIGNALS_VERSION, RoundColumns, trajectory_signals
from storage.parts import Store
from storage.schemas import ADDED_COLUMNS, JUDGMENTS, SIGNALS
from storage.trajectory_inputs import Written, judged_rows, write_inputs, write_parts

_ROUND_COLUMNS = [
    "gen_id", "scenario_id", "round", "draft", "feedback", "draft_hash", "writer_prompt_tokens",
    "writer_completion_tokens", "critic_prompt_tokens", "critic_completion_tokens", "embedding",
    "writer_mode", "critic_mode",
]  # fmt: skip
_VALUES = [f.name for f in SIGNALS if f.name not in ("gen_id", "scenario_id", "round")]
# Columns a stored row may lack (written before them): NULL there is "not stored", never a difference.
_LATER = tuple(ADDED_COLUMNS["signals"])


@dataclass
class SignalsReport:
    """What a build or a check found, per trajectory and per row."""

    trajectories: int = 0  # trajectories in the rounds
    built: int = 0  # trajectories whose signals were written now
    rows_written: int = 0
    checked_rows: int = 0  # stored rows recomputed
    different_rows: int = 0  # stored rows whose recomputed values differ
    unstored: int = 0  # trajectories without stored signals (check)
    inputs_parts: int = 0  # trajectory_inputs parts written with the signals (build)
    examples: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if k != "examples" or v}


def _key(table: pa.Table) -> pa.Array:
    return pc.binary_join_element_wise(table["gen_id"], table["scenario_id"], "\x1f")


def _lookups(store: Store) -> tuple[dict[str, str | None], dict[str, str], dict[str, str]]:
    """scenario_id -> gold answer; gen_id -> embedder; gen_id -> approval marker (approval_marker)."""
    scenarios = store.read("scenarios", columns=["scenario_id", "ground_truth"]).to_pydict()
    gold = dict(zip(scenarios["scenario_id"], scenarios["ground_truth"], strict=True))
    gens = store.read("generations", columns=["gen_id", "embedder", "config_json"]).to_pydict()
    markers = {g: approval_marker(c) for g, c in zip(gens["gen_id"], gens["config_json"], strict=True)}
    return gold, dict(zip(gens["gen_id"], gens["embedder"], strict=True)), markers


def approval_marker(config_json: str | None) -> str:
    """A generation's approval marker: its prompt preset's (``generation.prompts.approval`` in the
    generations row's config_json), APPROVED when it names none (an older store, an import)."""
    try:
        config = json.loads(config_json or "{}")
    except ValueError:
        return APPROVAL
    prompts = (config.get("generation") or {}).get("prompts") if isinstance(config, dict) else None
    marker = prompts.get("approval") if isinstance(prompts, dict) else None
    return marker if isinstance(marker, str) and marker else APPROVAL


def _stored_keys(store: Store) -> set[str]:
    """Trajectories with signals of the current version (whole: writers write whole trajectories)."""
    if not store.parts("signals"):
        return set()
    t = store.read("signals", columns=["gen_id", "scenario_id", "signals_version"])
    t = t.filter(pc.equal(t["signals_version"], SIGNALS_VERSION))
    return set(pc.unique(_key(t)).to_pylist())


def _computed(store: Store, skip: set[str] | None) -> Iterator[tuple[pa.Table, int, str]]:
    """Per rounds part: the signals of its trajectories (those not in ``skip``), how many it holds, its path."""
    gold, embedder, markers = _lookups(store)
    stored = pa.array(sorted(skip), pa.string()) if skip else None  # built once for every part
    for part in store.parts("rounds"):
        if stored is not None:  # read the keys first: a part whose trajectories all have signals costs no embedding
            keys = pc.unique(_key(pq.read_table(part, columns=["gen_id", "scenario_id"], filesystem=store.fs)))
            if pc.all(pc.is_in(keys, value_set=stored)).as_py():
                yield SIGNALS.empty_table(), len(keys), part
                continue
        rounds = store.read_part("rounds", part, _ROUND_COLUMNS)  # a part from before call modes: all live
        rounds = rounds.sort_by([("gen_id", "ascending"), ("scenario_id", "ascending"), ("round", "ascending")])
        keys = _key(rounds)
        n_traj = len(pc.unique(keys))
        if stored is not None:
            rounds = rounds.filter(pc.invert(pc.is_in(keys, value_set=stored)))
        if rounds.num_rows == 0:
            yield SIGNALS.empty_table(), n_traj, part
            continue
        c = rounds.drop_columns(["embedding"]).to_pydict()
        emb = rounds["embedding"].combine_chunks()
        dim = emb.type.list_size
        vectors = emb.flatten().to_numpy(zero_copy_only=False).reshape(-1, dim)
        try:
            cols = trajectory_signals(RoundColumns.of_rounds(c), vectors, gold, embedder, markers)
        except ValueError as exc:
            raise AnalysisError(f"{part}: {exc} (a rounds part must hold whole trajectories)") from None
        yield pa.table(cols, schema=SIGNALS), n_traj, part


def build(store: Store, *, missing_only: bool = True) -> SignalsReport:
    """Write the signals of every trajectory that lacks stored ones (``missing_only=False``: of all), and with
    those of a whole rounds part its trajectories' replay inputs (:mod:`storage.trajectory_inputs`)."""
    require_sound(store)
    report = SignalsReport()
    skip = _stored_keys(store) if missing_only else None
    verdicts: list[pa.Table] = []  # every judgments part's rows, read when first needed
    for table, n_traj, part in _computed(store, skip):
        report.trajectories += n_traj
        if table.num_rows:
            paths = write_parts(store, "signals", table)
            report.rows_written += table.num_rows
            built = len(pc.unique(_key(table)))
            report.built += built
            if built == n_traj and len(paths) == 1:  # every trajectory of the part: their inputs account for it
                verdicts = verdicts or [_verdicts(store)]
                (path,) = paths.values()
                report.inputs_parts += write_inputs(store, {None: Written(part, path, table, n_traj)}, verdicts[0])
    return report


def _verdicts(store: Store) -> pa.Table:
    """Every judgment of the store with the digest of its part (storage.trajectory_inputs.judged_rows)."""
    tables = [judged_rows(store.read_part("judgments", p), p) for p in store.parts("judgments")]
    return pa.concat_tables(tables) if tables else judged_rows(JUDGMENTS.empty_table(), "")


def check(store: Store, max_examples: int = 5) -> SignalsReport:
    """Recompute the signals of every stored row from its rounds; count rows that differ (NULL = NULL)."""
    require_sound(store)
    report = SignalsReport()
    stored = store.read("signals")
    stored = stored.filter(pc.equal(stored["signals_version"], SIGNALS_VERSION))
    con: duckdb.DuckDBPyConnection = new_connection()
    try:
        con.register("stored_signals", stored)
        for table, n_traj, _ in _computed(store, None):
            report.trajectories += n_traj
            con.register("recomputed_signals", table)
            ((checked, unstored, different, examples),) = con.execute(
                sql.signals_check_sql(_VALUES, max_examples, later=_LATER)
            ).fetchall()
            report.checked_rows += checked
            report.unstored += unstored
            report.different_rows += different
            report.examples += [e for e in (examples or []) if len(report.examples) < max_examples]
            con.unregister("recomputed_signals")
    finally:
        con.close()
    return report
