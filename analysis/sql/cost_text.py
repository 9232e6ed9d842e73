"""The replay's cost columns: its operational and evaluation tokens in US dollars, as SQL expressions.

DESIGN.md's token accounting, priced call by call with the trajectory's ``generation_prices`` (its model's
list prices, and the judge's), over replay_inputs' integer token lists:

- ``operational_cost_usd``: the operational tokens (writers <= paid round, critics < it, the judge's up to it
  only when the policy consults IS) at the price each call was paid: list price for a live call, list x
  (1 - batch_discount) for a batch call (mode stored per call);
- ``operational_cost_live_usd`` / ``operational_cost_batch_usd``: the same tokens as if every call had been
  live / batch -- what the policy costs deployed either way;
- ``evaluation_cost_usd``: the judge's tokens scoring the returned draft (a measurement, never charged to
  the policy), at the price they were paid.

Input (prompt) and output (completion) tokens are priced apart. A call of a model the table does not price
costs NULL, never a silent $0; a judge that is no model and made no call (the lexical judge) costs $0
(analysis.costs prices it so). The cached-input price is not applied: the store does not record cached
prompt tokens.

:func:`spent_values` reads what a row pays and returns from the lists, once (the replay computes them in a
CTE that the token columns share); :func:`cost_columns_sql` prices them.
"""

from __future__ import annotations

from analysis.sql import query


def _before(x: str, column: str, at: str) -> str:
    """The cumulative list ``column`` just before round ``at`` (0 at round 1)."""
    return f"CASE WHEN {at} > 1 THEN {x}{column}[{at} - 1] ELSE 0 END"


def spent_values(*, paid: str, at: str, batch: bool, x: str = "") -> dict[str, str]:
    """name -> expression over replay_inputs' lists (prefix ``x``): the tokens of the loop paid to round
    ``paid`` and their prompt share, the judge's to ``paid``, the judge's of round ``at`` (the evaluation);
    with ``batch``, the part of each paid in batch mode."""
    out = {
        "paid_loop": f"({x}cw[{paid}] + CASE WHEN {paid} > 1 THEN {x}cc[{paid} - 1] ELSE 0 END)",
        "paid_loop_prompt": f"{x}lp[{paid}]",
        "paid_judge": f"{x}cj[{paid}]",
        "paid_judge_prompt": f"{x}jp[{paid}]",
        "eval_judge": f"{x}j[{at}]",
        "eval_judge_prompt": f"({x}jp[{at}] - {_before(x, 'jp', at)})",
    }
    if batch:
        out |= {
            "batch_loop": f"{x}bl[{paid}]",
            "batch_loop_prompt": f"{x}blp[{paid}]",
            "batch_judge": f"{x}bj[{paid}]",
            "batch_judge_prompt": f"{x}bjp[{paid}]",
            "batch_eval": f"({x}bj[{at}] - {_before(x, 'bj', at)})",
            "batch_eval_prompt": f"({x}bjp[{at}] - {_before(x, 'bjp', at)})",
        }
    return out


def spent_sql(*, paid: str, at: str, batch: bool) -> str:
    """:func:`spent_values` as the columns of a select list (the replay's ``spent`` CTE)."""
    return ", ".join(f"{e} AS {n}" for n, e in spent_values(paid=paid, at=at, batch=batch).items())


def _dollars(x: str, who: str, tokens: str, prompt: str, factor: str = "") -> str:
    """``tokens`` (``prompt`` of them input) at ``who``'s ("loop": the generation's model, "judge") list prices,
    times ``factor`` (a batch call's 1 - discount). One text per (who, tokens): the columns that share it
    share its value (DuckDB computes a repeated expression once)."""
    d = query(
        "cost_dollars",
        tokens=tokens,
        prompt=prompt,
        input=f"{x}{who}_input_per_mtok",
        output=f"{x}{who}_output_per_mtok",
    )
    return f"({d}) * {factor}" if factor else d


def cost_columns_sql(*, judged: str, batch: bool, v: dict[str, str] | None = None, x: str = "") -> str:
    """The four cost columns of a replay row, the judge charged where ``judged``. ``v``: the spent values
    (:func:`spent_values`; default: columns of those names); ``x``: the prefix of the price columns;
    ``batch``: the batch parts are there, else every call was live."""
    v = v or {n: n for n in spent_values(paid="", at="", batch=batch)}
    lb, jb = f"(1.0 - {x}loop_batch_discount)", f"(1.0 - {x}judge_batch_discount)"
    loop, loop_p, judge, judge_p = v["paid_loop"], v["paid_loop_prompt"], v["paid_judge"], v["paid_judge_prompt"]
    live, judge_live = _dollars(x, "loop", loop, loop_p), _dollars(x, "judge", judge, judge_p)
    if batch:  # each call at its own mode's price: the live calls at list price, the batch calls discounted
        bl, blp, bj, bjp = v["batch_loop"], v["batch_loop_prompt"], v["batch_judge"], v["batch_judge_prompt"]
        be, bep, ev, evp = v["batch_eval"], v["batch_eval_prompt"], v["eval_judge"], v["eval_judge_prompt"]
        paid_loop = (
            f"{_dollars(x, 'loop', f'({loop} - {bl})', f'({loop_p} - {blp})')} + {_dollars(x, 'loop', bl, blp, lb)}"
        )
        paid_judge = (
            f"{_dollars(x, 'judge', f'({judge} - {bj})', f'({judge_p} - {bjp})')} + {_dollars(x, 'judge', bj, bjp, jb)}"
        )
        evaluation = (
            f"{_dollars(x, 'judge', f'({ev} - {be})', f'({evp} - {bep})')} + {_dollars(x, 'judge', be, bep, jb)}"
        )
    else:
        paid_loop, paid_judge = live, judge_live
        evaluation = _dollars(x, "judge", v["eval_judge"], v["eval_judge_prompt"])

    def charged(loop_part: str, judge_part: str) -> str:
        return f"({loop_part}) + CASE WHEN {judged} THEN ({judge_part}) ELSE 0.0 END"

    return ",\n       ".join(
        [
            f"{charged(paid_loop, paid_judge)} AS operational_cost_usd",
            f"{charged(live, judge_live)} AS operational_cost_live_usd",
            f"{charged(f'({live}) * {lb}', f'({judge_live}) * {jb}')} AS operational_cost_batch_usd",
            f"{evaluation} AS evaluation_cost_usd",
        ]
    )
