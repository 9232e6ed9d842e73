"""Opening a store from the replay inputs its writer stored (``trajectory_inputs``: :mod:`storage.trajectory_inputs`).

A store's first open grouped every signals row by trajectory, joined the judgments and checked the rounds --
1.5-2 s of a 2.8 s open at 100k trajectories -- before the replay could run. A store whose writer stored each
trajectory's inputs needs none of it, once those rows are shown to be what the parts say:

- every row names, by the sha256 digest in their names, the rounds, signals and judgments parts it was read
  from: each must be in the store (in the connection's scope), and no two parts of a table may share a digest;
- the rows account for every trajectory of every rounds and signals part in scope (a rounds part's row count is
  recorded with it) and hold each trajectory once: so the rounds are 1..T once each, as the writer checked, every
  trajectory has stored signals of the current version, and no round key is stored twice;
- they were written under the current ``signals_version`` and layout, by the judge the connection picks, and the
  judgments show no key twice and at most one verdict per draft by that judge (one scan): so a round's verdict in
  its row is the one the views join.

Anything else -- an older or imported store, a part compacted or moved to quarantine, a trajectory whose verdict
was written before it, a second judge asked for -- and :func:`stored_facts` answers None: the connection computes
everything from the parts, as before (the uniqueness check then names what is wrong). The facts it answers are
the ones the full computation gives (:class:`analysis.replay.views.StoreFacts`), and replay_inputs built from the
rows is the one built from the parts, value for value (tests/test_stored_inputs.py).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace

import duckdb

from analysis import sql
from analysis.errors import AnalysisError
from analysis.replay.sources import TableSources
from analysis.replay.views import STORED, StoreFacts, embedding_dim, pick_judge
from analysis.sql import ScenarioSlice
from shp_ray.policy.round_signals import SIGNALS_VERSION
from storage.parts import Store, part_digest
from storage.trajectory_inputs import INPUTS_VERSION, TABLE


def relation(tables: TableSources, gen_id: str | None, scenario_ids: Sequence[str] | ScenarioSlice | None) -> str:
    """The trajectory_inputs rows of the connection's scope."""
    return sql.narrowed(tables.of(TABLE, gen_id), gen_id, scenario_ids)


def stored_facts(
    con: duckdb.DuckDBPyConnection,
    store: Store,
    tables: TableSources,
    gen_id: str | None,
    scenario_ids: Sequence[str] | ScenarioSlice | None,
    judge: str | None,
    version: str | None,
) -> StoreFacts | None:
    """The connection's facts from the trajectory_inputs rows, if they can be believed (see the module); None: compute
    them from the parts. Needs the ``judgments_raw`` view."""
    scope = (lambda t: store.part_infos(t)) if gen_id is None else (lambda t: store.part_infos(t, gen_id))
    if not scope(TABLE):
        return None
    digests = {t: [part_digest(i.path) for i in scope(t)] for t in ("rounds", "signals")}
    digests["judgments"] = [part_digest(i.path) for i in store.part_infos("judgments")]
    if not digests["rounds"] or any(None in d or len(set(d)) < len(d) for d in digests.values()):
        return None  # a part without a digest (written before them), or two parts of the same bytes
    rows = tables.of(TABLE, gen_id)
    named = _named(con.execute(sql.query("stored_inputs_parts", inputs=rows)).fetchall(), digests)
    if named is None:
        return None
    try:
        picked = pick_judge(con, judge, version)
    except AnalysisError:  # no such judge, or several: the full computation says so, after its own checks
        return None
    if picked != named:
        return None
    where = sql.judge_where(*picked)
    ((keys_once, drafts_once, judge_batch),) = con.execute(
        sql.query("stored_inputs_judgments", judge_where=where)
    ).fetchall()
    if not (keys_once and drafts_once):
        return None
    narrowed = relation(tables, gen_id, scenario_ids)
    ((trajectories_once, rounds, batch, gen_ids),) = con.execute(
        sql.query("stored_inputs_facts", inputs=rows, narrowed=narrowed)
    ).fetchall()
    if not trajectories_once:
        return None
    dim = embedding_dim(store)
    facts = StoreFacts(*picked, dim, STORED, 0, int(rounds), False, bool(batch or judge_batch), tuple(gen_ids))
    return replace(facts, inputs=True)


def _named(groups: list[tuple], digests: dict[str, list[str | None]]) -> tuple[str | None, str | None] | None:
    """The one (judge, prompt version) of rows that name only parts in ``digests``, of the current versions, and
    account for every trajectory of every rounds and signals part there; None if they do not."""
    held: dict[str, int] = defaultdict(int)  # rounds part -> rows naming it
    recorded: dict[str, set[int]] = defaultdict(set)  # rounds part -> the trajectories its rows say it holds
    signals, judges = set(), set()
    present = {t: set(d) for t, d in digests.items()}
    for r_part, s_part, j_part, trajectories, judge, version, s_version, i_version, n in groups:
        if (s_version, i_version) != (SIGNALS_VERSION, INPUTS_VERSION):
            return None
        if r_part not in present["rounds"] or s_part not in present["signals"] or j_part not in present["judgments"]:
            return None
        held[r_part] += n
        recorded[r_part].add(trajectories)
        signals.add(s_part)
        judges.add((judge, version))
    if held.keys() != present["rounds"] or signals != present["signals"] or len(judges) != 1:
        return None
    if any(recorded[p] != {n} for p, n in held.items()):
        return None
    return judges.pop()
