"""The replay's SQL builders: replay_inputs (the cascade's comparisons as scalar round columns, the rest as
per-round lists) and the replay over it, whose cascade is CASE chains over those columns (cascade_code.sql)
or the decide() UDF (cascade_udf_code.sql).

The number of round columns is the store's deepest trajectory, so the text is built per connection; the
statements themselves are the ``.sql`` files of this folder.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from analysis.sql import REASON_CODES, double, quote
from analysis.sql.cost_text import cost_columns_sql, loop_tokens, round_costs
from analysis.sql.loader import query  # not via analysis.sql: mypy reads that name as its folder query/
from shp_ray.policy.cascade import KNOBS
from shp_ray.policy.scoring import check_weights

# The SQL type of a cascade knob's column (policies, the replay's row, the UDF's arguments), by its Python type.
KNOB_TYPES: dict[type, str] = {float: "DOUBLE", int: "INTEGER", bool: "BOOLEAN"}
# (column, SQL type) of every cascade knob, in cascade.KNOBS' order.
KNOB_COLUMNS: tuple[tuple[str, str], ...] = tuple((k.name, KNOB_TYPES[k.kind]) for k in KNOBS)


def _round_list(column: str, length: str, rounds: int) -> str:
    return _list_of([f"{column}_{t}" for t in range(1, rounds + 1)], length)


def _list_of(values: list[str], length: str) -> str:
    return f"[{', '.join(values)}][1:{length}]"


# replay_inputs' per-round lists (index t = round t, length depth): what the replay indexes at a row's round.
# The per-round dollars (cost_text.round_costs) are lists too: lc, jc, ec, and lcl, jcl with batch calls.
LISTS = ("d", "s", "a", "cw", "cc", "cj", "j", "hl", "em", "f1")


# The fields of r_t, round t's row of a trajectory (replay_inputs.sql's x); BATCH_FIELDS too with batch calls.
FIELDS = ("d", "s", "a", "w", "c", "j", "hl", "em", "f1", "wp", "cp", "jpr")
BATCH_FIELDS = ("wb", "cb", "jb")


def _upto(t: int, value: str) -> str:
    """The sum of ``value`` (a template over ``{r}``, round u's struct) over rounds u = 1..t. A round past the
    trajectory's depth is a NULL struct and adds 0; every token count a stored round has is non-NULL."""
    return " + ".join(f"coalesce({value.format(r=f'r_{u}')}, 0)" for u in range(1, t + 1)) if t >= 1 else "0"


def _paid_to(t: int, writer: str, critic: str) -> str:
    """The sum over the loop paid to round t: ``writer`` of rounds <= t plus ``critic`` of rounds < t."""
    return f"({_upto(t, writer)} + {_upto(t - 1, critic)})::BIGINT"


def replay_inputs_sql(
    rounds: int,
    signals: str = "round_signals",
    batch: bool = False,
    gen_type: str = "VARCHAR",
    stored: StoredInputs | None = None,
) -> str:
    """One row per trajectory of ``signals`` (replay_inputs.sql): the cascade's comparisons as scalar columns
    (``m<k>_<t>``, ``g_<t>``), every per-round value as a list of the trajectory's depth, the baselines;
    ``rounds``: the deepest trajectory (at least 1); ``batch``: some call was paid in batch mode, so the
    batch calls' token lists are built too (a store of live calls pays nothing for them); ``gen_type``: the type
    of gen_id (:func:`analysis.sql.gen_id_type`). ``stored``: read the trajectories from the store's
    trajectory_inputs rows instead of grouping ``signals`` (replay_inputs_stored.sql: the same values)."""
    rounds = max(1, int(rounds))
    fields = FIELDS + (BATCH_FIELDS if batch else ())
    if stored is None:
        row = "{" + ", ".join(f"'{f}': {f}" for f in fields) + "}"
        per_round = [f"any_value({row}) FILTER (WHERE round = {t}) AS r_{t}" for t in range(1, rounds + 1)]
        grouped = query("replay_inputs_grouped", signals=signals, per_round=",\n       ".join(per_round))
    else:
        per_round = [f"rounds[{t}] AS r_{t}" for t in range(1, rounds + 1)]
        grouped = query("replay_inputs_stored", inputs=stored.relation, per_round=", ".join(per_round))
    values = []
    for t in range(1, rounds + 1):
        values += [f"r_{t}.{c} AS {c}_{t}" for c in ("d", "s", "a", "j", "hl", "em", "f1")]
        if stored is not None:  # IS_t under the connection's weights, from the judge's metrics the row holds
            values[-6] = f"{_stored_is(stored.weights, t)} AS s_{t}"
        values += [f"({_upto(t, '{r}.' + c)})::BIGINT AS c{c}_{t}" for c in ("w", "c", "j")]
        values += [f"{_paid_to(t, '{r}.wp', '{r}.cp')} AS lp_{t}", f"({_upto(t, '{r}.jpr')})::BIGINT AS jp_{t}"]
        if batch:
            values += [
                f"{_paid_to(t, 'CASE WHEN {r}.wb THEN {r}.w END', 'CASE WHEN {r}.cb THEN {r}.c END')} AS bl_{t}",
                f"{_paid_to(t, 'CASE WHEN {r}.wb THEN {r}.wp END', 'CASE WHEN {r}.cb THEN {r}.cp END')} AS blp_{t}",
                f"({_upto(t, 'CASE WHEN {r}.jb THEN {r}.j END')})::BIGINT AS bj_{t}",
                f"({_upto(t, 'CASE WHEN {r}.jb THEN {r}.jpr END')})::BIGINT AS bjp_{t}",
            ]
    derived = [
        f"greatest({', '.join(f'd_{u}' for u in range(t - k + 1, t + 1))}) AS m{k}_{t}"
        for k in range(1, rounds)
        for t in range(k + 1, rounds + 1)
    ]
    derived += [f"s_{t} - s_{t - 1} AS g_{t}" for t in range(2, rounds + 1)]
    derived += [f"{_round_list(c, 'depth', rounds)} AS {c}" for c in LISTS]
    derived.append(f"{_list_of([loop_tokens(t) for t in range(1, rounds + 1)], 'depth')} AS lt")
    priced = [round_costs(t, batch) for t in range(1, rounds + 1)]
    derived += [f"{_list_of([c[name] for c in priced], 'depth')} AS {name}" for name in priced[0]]
    return query(
        "replay_inputs",
        grouped=grouped,
        round_values=",\n           ".join(values),
        derived=",\n       ".join(derived),
        gen_type=gen_type,
    )


@dataclass(frozen=True)
class StoredInputs:
    """The trajectory_inputs rows replay_inputs reads (a relation, checked by analysis.replay.stored_inputs) and the
    weights IS is computed under."""

    relation: str
    weights: Mapping[str, float]


def _stored_is(weights: Mapping[str, float], t: int) -> str:
    """IS_t from round t's stored metrics (``r_t``): :func:`analysis.sql.is_expression`'s value -- NULL when a
    positively weighted metric is NaN or NULL, else the weighted sum in METRICS order clipped to [0, 1] -- with one
    test on the sum instead of two per metric (0.15 CPU-s at 100k trajectories): a NaN or NULL term makes the sum
    NaN or NULL, and a stored metric is never infinite (storage.schemas.VALUE_RANGES)."""
    terms = [(m, w) for m, w in check_weights(weights).items() if w != 0.0]
    total = "(0.0::DOUBLE" + "".join(f" + {double(w)} * r_{t}.{m}" for m, w in terms) + ")"
    return f"CASE WHEN {total} IS NULL OR isnan({total}) THEN NULL ELSE least(1.0, greatest(0.0, {total})) END"


def cascade_code_sql(rounds: int) -> str:
    """tau*8 + reason code of the cascade (pure SQL) over replay_inputs with ``rounds`` round columns."""
    rounds = max(1, int(rounds))
    entropy = " ".join(
        f"WHEN {k} THEN CASE "
        + " ".join(f"WHEN {t} <= depth AND m{k}_{t} < eps THEN {t}" for t in range(k + 1, rounds + 1))
        + " END"
        for k in range(1, rounds)
    )
    gain = " ".join(
        f"WHEN greatest(warmup, 2) <= {t} AND {t} <= depth AND g_{t} <= min_gain THEN {t}" for t in range(2, rounds + 1)
    )
    return query(
        "cascade_code",
        entropy_hit=f"CASE k {entropy} END" if entropy else "NULL::INTEGER",
        gain_hit=f"CASE {gain} END" if gain else "NULL::INTEGER",
        **{reason: str(code) for code, reason in REASON_CODES.items()},
    )


def replay_sql(rounds: int, executor: str = "sql", batch: bool = False) -> str:
    """Every policy x every trajectory in one query over replay_inputs (``rounds`` round columns);
    ``executor`` picks the cascade form; ``batch``: replay_inputs has the batch calls' lists.

    ``sql``: the CASE chains of cascade_code.sql. ``udf``: the Arrow UDF ``shp_cascade`` that
    loops :func:`shp_ray.policy.cascade.decide` (registered by :mod:`analysis.replay.cascade_udf`).
    """
    if executor == "sql":
        code = cascade_code_sql(rounds)
    elif executor == "udf":  # max_rounds reaches decide() as the row's cap: a policy runs no deeper than the trajectory
        code = query("cascade_udf_code", knobs=", ".join("cap" if n == "max_rounds" else n for n, _ in KNOB_COLUMNS))
    else:
        raise ValueError(f"unknown replay executor {executor!r}; choose 'sql' or 'udf'")
    reasons = " ".join(f"WHEN {c} THEN {quote(r)}" for c, r in REASON_CODES.items())
    costs = cost_columns_sql(judged="consults_is", batch=batch, paid="paid", at="stop_round")
    knobs = ", ".join(f"p.{n}" for n, _ in KNOB_COLUMNS if n != "max_rounds")
    return query("replay", knobs=knobs, code=code, reasons=reasons, costs=costs)
