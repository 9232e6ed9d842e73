"""Every DuckDB statement of the project, in one place: the ``<name>.sql`` files of this folder's owner folders.

    sql.query("report_best_policy")                 # a statement, by name
    sql.query("bench_signals", columns="gen_id, round")   # a template: its $placeholders filled
    sql.round_signals_sql(384, "true", weights)     # a builder: computes the pieces, fills the template

A file is one statement (or one expression, or one script of statements); its leading ``--`` lines
document it and are not part of the text. ``$name`` is a placeholder filled by :func:`query` (all
of them, exactly: string.Template), ``$$`` a literal dollar, any other ``$`` is itself (a JSON path).
The builders below compute what cannot be written down once: SQL literals (:func:`quote`,
:func:`double`), IS under given weights, the t quantiles, the ``policies`` rows, a store's sources.

The Python connection (:mod:`analysis.replay.db`) and the plain DuckDB CLI init script
(``<store>/views.sql``) run the SAME statements, so they cannot drift apart.

Pipeline (one scan of the store's scalar signals, then pure arithmetic per policy)::

    signals (Parquet: d_t, approval, tokens, EM/F1) --+--> round_signals (+ IS_t; a view)
      [or computed from round_parts' embeddings]      |          |
    judgments (Parquet) ------------------------------+          v
                   replay_inputs (one row per gen_id, scenario_id: the cascade's comparisons as scalar
                                  columns, per-round lists; materialised once)
                                       |  x  policies (one row per policy / cell)
                                       v
                   replay (stop_round, reason, tokens and their cost in dollars, final_is, EM/F1 of the
                           returned draft) --> policy_summary
                   [the cost columns: cost_text.py, with each generation's prices (analysis.replay.costs)]

The cascade in ``replay`` is :func:`shp_ray.policy.cascade.decide` written as CASE
chains over replay_inputs' scalar columns (analysis/sql/replay_text.py): each signal's
first halting round, as ``t*8 + reason_code`` (codes in REASON_CODES, in the cascade's
priority order); the smallest value is the first halting round and its reason. Property tests hold it equal to the
reference executor :func:`shp_ray.policy.reference.replay`.
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Iterable, Mapping, Sequence

from analysis import scipy_stats as _st
from analysis.sql.loader import OWNERS, UnknownQuery, names, query  # noqa: F401  (the one loader, re-exported)
from shp_ray.policy import resample
from shp_ray.policy.answer import NO_PARTIAL_CREDIT
from shp_ray.policy.cascade import Reason
from shp_ray.policy.families.verifier import VISIBLE_TESTS_SCORE
from shp_ray.policy.round_signals import SIGNALS_VERSION
from shp_ray.policy.scoring import METRICS, check_weights

# The replay's code of each stop reason (t*8 + code): its place in the cascade's priority order (cascade.Reason).
REASON_CODES: dict[int, str] = {code: str(reason) for code, reason in enumerate(Reason, start=1)}

# Python's str.isspace() characters: approved() strips them before matching (approval_text.py).
_PY_SPACE = (
    r"\t\n\x{0b}\x{0c}\r\x{1c}-\x{1f} \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}"
)
# shp_ray.policy.answer in RE2 terms: Python's \w is a Unicode letter, digit or "_", its \s the _PY_SPACE set.
_PY_WORD = r"\p{L}\p{N}_"
ARTICLES_REGEX = rf"(^|[^{_PY_WORD}])(a|an|the)([^{_PY_WORD}]|$)"
ANSWER_LINE_REGEX = rf"^[{_PY_SPACE}]*(?i:final answer|answer):"

# One-sided 95% t quantiles for the SQL non-inferiority check: exact (scipy) up to
# df = 300, a Cornish-Fisher expansion beyond (error < 1e-9), so the plain DuckDB
# CLI computes the same ``non_inferior`` as the Python connection.
_T_TABLE_MAX_DF = 300
_Z95 = 1.6448536269514722

# --- literals and small pieces --------------------------------------------------------------------


def quote(text: str) -> str:
    """A SQL string literal."""
    return "'" + str(text).replace("'", "''") + "'"


def quote_list(values: Iterable[str]) -> str:
    """The inside of ``IN (...)``: quoted literals, or NULL for none.

    ``IN ()`` is no SQL; ``IN (NULL)`` matches nothing.
    """
    return ", ".join(quote(v) for v in values) or "NULL"


def double(value: float) -> str:
    """An exact DOUBLE literal (a bare 0.1 would parse as DECIMAL)."""
    return f"{quote(repr(float(value)))}::DOUBLE"


def create(name: str, select: str, *, table: bool = False) -> str:
    """CREATE OR REPLACE the view ``name`` (``table``: a temp table, computed once) AS ``select``."""
    return f"CREATE OR REPLACE {'TEMP TABLE' if table else 'VIEW'} {name} AS {select}"


_VIEW_HEAD = re.compile(r"(CREATE OR REPLACE (?:TEMP )?VIEW \S+) AS ")


def deferred(statement: str) -> str:
    """``statement`` with its view bound when a query first reads it, not when it is created.

    DuckDB binds a view's whole stack of views on CREATE, and binds it again in every query that reads it: on a
    connection, creating the views cost more than anything else on a small store. The plain DuckDB CLI of
    ``views.sql`` (1.5) does not know the option, so the statements themselves stay without it.
    """
    return _VIEW_HEAD.sub(r"\1 WITH (DEFER_BINDING) AS ", statement, count=1)


def is_expression(weights: Mapping[str, float], prefix: str = "", suffix: str = "") -> str:
    """IS under ``weights``, summed in METRICS order like scoring.information_score, over the columns
    ``<prefix><metric><suffix>`` (a suffix ``[t]``: round t of a list column).

    NULL when a positively weighted metric is NaN or missing (never 0), clipped to [0, 1].
    """
    w = check_weights(weights)
    terms = [(f"{prefix}{m}{suffix}", wm) for m, wm in w.items() if wm != 0.0]
    total = "0.0::DOUBLE" + "".join(f" + {double(wm)} * {m}" for m, wm in terms)
    unknown = " OR ".join(f"{m} IS NULL OR isnan({m})" for m, _ in terms) or "false"
    return f"CASE WHEN {unknown} THEN NULL ELSE least(1.0, greatest(0.0, {total})) END"


def judge_where(judge: str | None, version: str | None) -> str:
    """The condition on judgments_raw that picks one judge (and prompt version); ``true``: any."""
    parts = ["true"]
    if judge is not None:
        parts.append(f"judge = {quote(judge)}")
    if version is not None:
        parts.append(f"judge_prompt_version = {quote(version)}")
    return " AND ".join(parts)


MAX_GEN_ENUM = 4096  # more generations in one connection than this: gen_id stays text


def gen_id_type(gen_ids: Sequence[str]) -> str:
    """The type of replay_inputs' (and so the replay's) gen_id: an ENUM of the generations in scope, sorted (so
    ORDER BY sorts as text; it compares, joins and LIKEs as text). Exporting a 6.5M-row replay to Arrow spent
    most of its string time on gen_id (a 64-hex id per row); a code per row and one dictionary cost a fraction."""
    if not gen_ids or len(gen_ids) > MAX_GEN_ENUM:
        return "VARCHAR"
    return "ENUM(" + ", ".join(quote(g) for g in sorted(gen_ids)) + ")"


def policies_table(columns: Sequence[tuple[str, str]], rows: Iterable[Mapping[str, object]]) -> str:
    """CREATE the ``policies`` temp table with ``columns`` (name, SQL type) and INSERT ``rows``."""
    stmt = query("policies_create", columns=", ".join(f"{n} {t}" for n, t in columns))
    values = ",\n  ".join("(" + ", ".join(_literal(r[n], t) for n, t in columns) + ")" for r in rows)
    return (stmt + "\n" + query("policies_insert", values=values)) if values else stmt


def literal(value: object, sqltype: str) -> str:
    """A SQL literal of ``sqltype`` (DOUBLE, BOOLEAN, VARCHAR, integers); None is a typed NULL."""
    return f"NULL::{sqltype}" if value is None else _literal(value, sqltype)


def _literal(value: object, sqltype: str) -> str:
    if sqltype == "DOUBLE":
        return double(float(value))  # type: ignore[arg-type]
    if sqltype == "BOOLEAN":
        return "true" if value else "false"
    if sqltype == "VARCHAR" or sqltype.startswith("ENUM("):
        return quote(str(value))
    return f"{int(value)}::{sqltype}"  # type: ignore[call-overload]


# --- the views: signals, trajectories, replay, summary ----------------------------------------------


def round_signals_sql(signals: str, judge_where: str, weights: Mapping[str, float], *, unique: bool = False) -> str:
    """Per generated round: the ``signals`` relation's d_t, approval, tokens, EM/F1, with IS_t (under
    ``weights``, by the judge ``judge_where`` picks). ``unique``: that judge is known to have at most one
    judgment per draft (judgments_unique.sql, checked on the rows this text will read), so no pick is needed."""
    return query(
        "round_signals",
        signals=signals,
        judge_metrics=", ".join(METRICS),
        pick="" if unique else query("judgment_pick", judge_metrics=", ".join(METRICS)),
        judge_where=judge_where,
        is_score=is_expression(weights, "j."),
        metrics=", ".join(f"j.{m}" for m in METRICS),
    )


def signals_stored_sql() -> str:
    """The store's signals rows of the current signals_version (signals_stored.sql)."""
    return query("signals_stored", version=quote(SIGNALS_VERSION))


def signals_from_rounds_sql(rounds: str, dim: int) -> str:
    """The signals computed from the rounds rows of the relation ``rounds`` (reads their embeddings)."""
    return query(
        "signals_from_rounds",
        rounds=rounds,
        dim=int(dim),
        approved_regex=quote(APPROVED_REGEX),
        markers=approval_markers_sql(),
        answers=answers_sql(rounds),
    )


def signals_check_sql(values: Sequence[str], limit: int, later: Sequence[str] = ()) -> str:
    """The comparison of recomputed and stored signals (signals_check.sql) over the ``values`` columns; a
    ``later`` column (added after rows were stored) is compared only where the stored row has it."""
    differs = (
        " OR ".join(
            f"(s.{c} IS NOT NULL AND r.{c} IS DISTINCT FROM s.{c})" if c in later else f"r.{c} IS DISTINCT FROM s.{c}"
            for c in values
        )
        or "false"
    )
    return query("signals_check", differs=f"({differs})", limit=int(limit))


def signals_mixed_sql(dim: int) -> str:
    """Stored signals where a trajectory has them, computed from its rounds where not (needs signal_status)."""
    computed = signals_from_rounds_sql(f"({query('signals_unstored_rounds')})", dim)
    return query("signals_mixed", stored=signals_stored_sql(), computed=computed)


def answer_normalize_sql(text: str) -> str:
    """HotpotQA's normalize_answer of the SQL expression ``text`` (an expression)."""
    return query(
        "answer_normalize",
        text=text,
        punctuation=quote(string.punctuation),
        articles=quote(ARTICLES_REGEX),
        space=quote(f"[{_PY_SPACE}]+"),
    )


def answer_scoring() -> dict[str, str]:
    """What every reading of an answer scores it with: norm_answer / norm_gold (answer_normalize.sql), the counted
    CTEs (answer_tokens.sql) and the f1 expression (answer_token_f1.sql)."""
    return {
        "norm_answer": answer_normalize_sql("answer"),
        "norm_gold": answer_normalize_sql("ground_truth"),
        "counted": query("answer_tokens"),
        "f1": query("answer_token_f1", no_partial=quote_list(NO_PARTIAL_CREDIT)),
    }


def answers_sql(rounds: str = "round_parts") -> str:
    """Per draft of ``rounds``: has_answer_line, answer_em, answer_f1 against the gold answer (answers.sql)."""
    return query("answers", rounds=rounds, answer_line=quote(ANSWER_LINE_REGEX), **answer_scoring())


def t95_sql(df: str) -> str:
    """The one-sided 95% t quantile at ``df`` (an SQL expression); needs t95_table."""
    return query("t95", df=df, max_df=_T_TABLE_MAX_DF, cornish_fisher=_cornish_fisher(df))


def _cornish_fisher(df: str) -> str:
    """The one-sided 95% t quantile past t95_table: the Cornish-Fisher expansion in ``df`` (an SQL expression)."""
    z = _Z95
    g = [
        (z**3 + z) / 4,
        (5 * z**5 + 16 * z**3 + 3 * z) / 96,
        (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
        (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160,
    ]
    return f"{double(z)}" + "".join(f" + {double(gi)} / ({df})::DOUBLE ^ {i}" for i, gi in enumerate(g, start=1))


@functools.cache
@_st.kept("t95")  # every open needs it: once per machine
def _t95_quantiles() -> tuple[float, ...]:
    # one vectorised call (the same values as one call per df, 100x faster)
    return tuple(_st.t_ppf(0.95, list(range(1, _T_TABLE_MAX_DF + 1))).tolist())


@functools.cache
@_st.kept("z")
def _z_alpha_power() -> tuple[float, float]:
    """The normal quantiles of the TOST's alpha (0.05, one-sided) and of the planner's power (0.8)."""
    return _st.norm_ppf(0.95), _st.norm_ppf(0.8)


def t95_table_sql() -> str:
    rows = ", ".join(f"({df}, {double(q)})" for df, q in enumerate(_t95_quantiles(), start=1))
    return query("t95_table", rows=rows)


def tost_plan_sql(detectable: Iterable[tuple[int, float]], points: int = 400) -> str:
    """The planner's table and macros (tost_plan.sql): ``detectable`` is (n, delta/SD detected with power 0.8)
    for n = 2.. (analysis.sql.tost_table.detectable_margins); needs t95_table."""
    rows = ", ".join(f"({int(n)}, {double(es)})" for n, es in detectable)
    z_alpha, z_power = _z_alpha_power()
    return query(
        "tost_plan",
        rows=rows,
        points=int(points),
        max_df=_T_TABLE_MAX_DF,
        t95_list="[" + ", ".join(double(q) for q in _t95_quantiles()) + "]",
        cornish_fisher=_cornish_fisher("df"),
        z_sum=double(z_alpha + z_power),
        z_alpha=double(z_alpha),
    )


def policy_summary_sql(delta: float) -> str:
    """Per (gen_id, split, policy): means, token saving vs fixed_k{depth}, paired delta IS, non-inferiority, answer
    correctness (EM/F1) and the power of the non-inferiority test (needs tost_plan_sql). ``non_inferior``: the
    one-sided 95% lower bound of mean(final_is - baseline_is) is above -delta. analysis.stats gives the p-values."""
    shares = ", ".join(f"avg((reason = {quote(r)})::INTEGER) AS share_{r}" for r in REASON_CODES.values())
    return query("policy_summary", shares=shares, verdict=policy_verdict_sql(delta), delta=double(delta))


def policy_verdict_sql(delta: float) -> str:
    """The ``bound`` and ``planned`` CTEs after a policy summary's ``agg`` (policy_verdict.sql) at ``delta``."""
    return query("policy_verdict", t95=t95_sql("n_is - 1"), delta=double(delta))


def sweep_summary_view_sql(delta: float) -> str:
    """The sweep jobs' combined table over the stored ``results`` rows (needs t95_table)."""
    return query("sweep_summary_view", t95=t95_sql("n_is - 1"), delta=double(delta))


def replay_scores_sql(families: bool) -> str:
    """Every stored score at each policy's stop and the baseline's, with the oracle of each score
    (replay_scores.sql) and the resampling control where the store holds one (resample_control.sql). ``families``:
    the family rows too (family_replay, returning selected_round)."""
    rows = (
        "UNION ALL SELECT policy, gen_id::VARCHAR, scenario_id, stop_round, selected_round, reason, "
        "operational_tokens, depth FROM family_replay"
    )
    stops = query("replay_scores_stops", families=rows if families else "")
    control = query("resample_control", policy=resample.NAME, reason=resample.REASON, verdict=VISIBLE_TESTS_SCORE)
    return query("replay_scores", stops=stops, control=control)


def score_summary_sql(delta: float) -> str:
    """Per (gen_id, policy, score): the paired difference against fixed_k{depth} (needs tost_plan_sql)."""
    return query("score_summary", t95=t95_sql("n_paired - 1"), delta=double(delta))


# --- the other stopping families (analysis.replay.family_replay runs them) ------------------------------------


def family_policies_sql(kinds: Iterable[str]) -> str:
    return query("family_policies", kinds=quote_list(kinds))


def family_replay_sql(outcome_kinds: Iterable[str] = (), batch: bool = False) -> str:
    """The family policies' replay rows from their decisions (family_decisions) and replay_inputs' lists;
    the reasons of ``outcome_kinds`` (verifier-first) are outcomes too. Their cost: judge-free, the loop
    paid to tau, the evaluation of the returned (selected) round; ``batch``: replay_inputs' batch lists."""
    costs = cost_columns_sql(judged="false", batch=batch, paid="d.stop_round", at="d.selected_round", x="x.")
    return query("family_replay", outcome_kinds=quote_list(outcome_kinds), costs=costs)


# The builders that live beside this module: a store's tables as sources, the replay's (its inputs' round
# columns, the cascade's CASE chains, the cost columns).
from analysis.sql.approval_text import APPROVED_REGEX, approval_markers_sql, approval_regex  # noqa: E402, F401
from analysis.sql.cost_text import cost_columns_sql  # noqa: E402
from analysis.sql.replay_text import StoredInputs, cascade_code_sql, replay_inputs_sql, replay_sql  # noqa: E402, F401
from analysis.sql.source_text import (  # noqa: E402, F401
    ScenarioSlice,
    empty_select,
    narrowed,
    read_parquet,
    table_source,
    with_added_values,
)
