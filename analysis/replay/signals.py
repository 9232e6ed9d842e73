"""Per-round signals in and out of the replay: their columns, the trajectories they make for the
reference executor, and a replay connection over given signals (no store).

``SIGNAL_COLUMNS`` are the numbers the SQL replay reads per round; reading them back through
:func:`trajectories_from_signals` gives the reference executor the SAME inputs, which is how tests
and the benchmark compare the two.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import duckdb
import pyarrow as pa

from analysis import sql
from analysis.errors import AnalysisError
from analysis.replay import catalog
from analysis.replay.cascade_udf import register_udfs
from analysis.replay.policy_table import default_policies, policies_sql
from analysis.replay.sandbox import new_connection
from analysis.replay.scope import DEFAULT_DELTA
from analysis.replay.sources import fields
from analysis.replay.views import COMPUTED, StoreFacts, deepest
from shp_ray.policy.cascade import APPROVAL
from shp_ray.policy.table import Policy
from shp_ray.policy.trajectory import Round, Trajectory

SIGNAL_COLUMNS = pa.schema(
    [
        ("gen_id", pa.string()),
        ("scenario_id", pa.string()),
        ("round", pa.int32()),
        ("distance", pa.float64()),
        ("is_score", pa.float64()),
        ("feedback", pa.string()),
        ("writer_tokens", pa.int64()),
        ("critic_tokens", pa.int64()),
        ("judge_tokens", pa.int64()),
    ]
)


SIGNAL_SELECT = ", ".join(SIGNAL_COLUMNS.names)  # the column list of a query that reads them


def trajectories_from_signals(rows: Iterable[tuple]) -> list[Trajectory]:
    """Trajectories for the reference executor from rows of SIGNAL_COLUMNS, ordered by
    (gen_id, scenario_id, round): the SAME numbers the SQL replay reads (NULL -> NaN)."""
    out: dict[tuple[str, str], list[Round]] = {}
    for g, s, t, d, score, fb, w, c, j in rows:
        out.setdefault((g, s), []).append(
            Round(t, math.nan if d is None else d, math.nan if score is None else score, fb, w, c, j)
        )
    return [Trajectory(s, tuple(r), gen_id=g) for (g, s), r in out.items()]


def load_signals(con: duckdb.DuckDBPyConnection, signals: pa.Table, approval: str = APPROVAL) -> None:
    """(Re)fill the ``round_signals`` table of ``con`` from ``signals`` (SIGNAL_COLUMNS; approval read
    from each critique by the SQL regex of the marker ``approval``, the way a store without stored signals
    is read), and the
    replay's inputs and views over them (their round columns follow the deepest trajectory)."""
    try:
        table = signals.select(SIGNAL_COLUMNS.names).cast(SIGNAL_COLUMNS)
    except (KeyError, pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise AnalysisError(f"signals do not match {SIGNAL_COLUMNS.names}: {exc}") from None
    con.register("signals_input", table)
    try:
        select = sql.query("signals_input", approved_regex=sql.quote(sql.approval_regex(approval)))
        con.execute(sql.create("round_signals", select, table=True))
    finally:
        con.unregister("signals_input")
    rounds = deepest(con, "round_signals")
    for stmt in catalog.statements(_build(rounds, DEFAULT_DELTA), _views(_LOADED)):
        con.execute(stmt)
    register_udfs(con, rounds)


def connect_signals(
    signals: pa.Table,
    policies: Iterable[Policy] | None = None,
    *,
    delta: float = DEFAULT_DELTA,
    approval: str = APPROVAL,
) -> duckdb.DuckDBPyConnection:
    """The replay over given per-round signals (no store): the same SQL as :func:`analysis.connect`.

    ``signals`` has SIGNAL_COLUMNS (one row per round; distance NaN/NULL at
    round 1). Property tests feed hypothesis trajectories through it, and the
    benchmark times the replay apart from the one-time store scan. ``approval``: the marker an approving
    critique starts with (its prompt preset's).
    """
    con = new_connection()
    con.execute(policies_sql(default_policies() if policies is None else policies))
    load_signals(con, signals, approval)
    rounds = deepest(con, "round_signals")
    for stmt in catalog.statements(_build(rounds, delta), _views(_SUMMARIES, _LOADED)):
        con.execute(stmt)
    return con


# The store's views (analysis.replay.catalog), over given rows in place of a store: round_signals holds the rows,
# the caller makes the policies table; no scenarios (a split is NULL), no generations (nothing to price or to
# resample: every cost NULL, no control), no scores, no drafts (answer metrics NULL: signals_input.sql).
_GIVEN = ("round_signals", "policies")
_LOADED = ("replay_inputs", "trajectories", "replay_core")  # what load_signals (re)builds over new rows
# what connect_signals adds: the summaries, and the views a caller reads beside them, as on a store
_SUMMARIES = ("policy_summary", "answers", "prices", "replay_score_map", "correctness_summary", "break_rate")
_OVER_SIGNALS = {
    "scenario_splits": catalog.View("scenario_splits", make=lambda b: sql.query("scenario_splits_unknown")),
    "scores_raw": catalog.View("scores_raw", make=lambda b: sql.empty_select(fields("scores"))),
    "generations": catalog.View("generations", make=lambda b: sql.empty_select(fields("generations"))),
}


def _views(names: Iterable[str], built: Iterable[str] = ()) -> list[catalog.View]:
    """The views ``names`` and what they need, over given signals, less the given and the ``built`` ones (what
    those need is not looked into: it is there)."""
    there = {*_GIVEN, *built}
    views = [catalog.View(v.name) if v.name in there else _OVER_SIGNALS.get(v.name, v) for v in catalog.VIEWS]
    return [v for v in catalog.closure(names, views) if v.name not in there]


def _build(rounds: int, delta: float) -> catalog.Build:
    facts = StoreFacts(None, None, 1, COMPUTED, -1, rounds, fill_calls=False, batch=False)
    return catalog.Build(facts, delta)
