"""The replay's SQL builders: replay_inputs (the cascade's comparisons as scalar round columns, the rest as
per-round lists) and the replay over it, whose cascade is CASE chains over those columns (cascade_code.sql)
or the decide() UDF (cascade_udf_code.sql).

The number of round columns is the store's deepest trajectory, so the text is built per connection; the
statements themselves are the ``.sql`` files of this folder.
"""

from __future__ import annotations

from analysis.sql import REASON_CODES, query, quote


def _round_list(column: str, length: str, rounds: int) -> str:
    return f"[{', '.join(f'{column}_{t}' for t in range(1, rounds + 1))}][1:{length}]"


# replay_inputs' per-round lists (index t = round t, length depth): what the replay indexes at a row's round.
LISTS = ("d", "s", "a", "cw", "cc", "cj", "j", "hl", "em", "f1")


def replay_inputs_sql(rounds: int, signals: str = "round_signals") -> str:
    """One row per trajectory of ``signals`` (replay_inputs.sql): the cascade's comparisons as scalar columns
    (``m<k>_<t>``, ``g_<t>``), every per-round value as a list of the trajectory's depth, the baselines;
    ``rounds``: the deepest trajectory (at least 1)."""
    rounds = max(1, int(rounds))
    per_round = []
    for t in range(1, rounds + 1):
        per_round += [
            f"any_value({c}) FILTER (WHERE round = {t}) AS {c}_{t}" for c in ("d", "s", "a", "j", "hl", "em", "f1")
        ]
        per_round += [f"sum({c}) FILTER (WHERE round <= {t})::BIGINT AS c{c}_{t}" for c in ("w", "c", "j")]
    derived = [
        f"greatest({', '.join(f'd_{u}' for u in range(t - k + 1, t + 1))}) AS m{k}_{t}"
        for k in range(1, rounds)
        for t in range(k + 1, rounds + 1)
    ]
    derived += [f"s_{t} - s_{t - 1} AS g_{t}" for t in range(2, rounds + 1)]
    derived += [f"{_round_list(c, 'depth', rounds)} AS {c}" for c in LISTS]
    return query("replay_inputs", signals=signals, per_round=",\n           ".join(per_round),
                 derived=",\n       ".join(derived))  # fmt: skip


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
    )


def replay_sql(rounds: int, executor: str = "sql") -> str:
    """Every policy x every trajectory in one query over replay_inputs (``rounds`` round columns);
    ``executor`` picks the cascade form.

    ``sql``: the CASE chains of cascade_code.sql. ``udf``: the Arrow UDF ``shp_cascade`` that
    loops :func:`shp_ray.policy.cascade.decide` (registered by :mod:`analysis.cascade_udf`).
    """
    if executor == "sql":
        code = cascade_code_sql(rounds)
    elif executor == "udf":
        code = query("cascade_udf_code")
    else:
        raise ValueError(f"unknown replay executor {executor!r}; choose 'sql' or 'udf'")
    reasons = " ".join(f"WHEN {c} THEN {quote(r)}" for c, r in REASON_CODES.items())
    return query("replay", code=code, reasons=reasons)
