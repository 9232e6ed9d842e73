"""The replay's cost columns: its operational and evaluation tokens in US dollars, as SQL expressions.

docs/design.md's token accounting, priced call by call with the trajectory's ``generation_prices`` (its model's
list prices, and the judge's), over replay_inputs' integer token counts:

- ``operational_cost_usd``: the operational tokens (writers <= paid round, critics < it, the judge's up to it
  only when the policy consults IS) at the price each call was paid: list price for a live call, list x
  (1 - batch_discount) for a batch call (mode stored per call);
- ``operational_cost_live_usd`` / ``operational_cost_batch_usd``: the same tokens as if every call had been
  live / batch -- what the policy costs deployed either way;
- ``evaluation_cost_usd``: the judge's tokens scoring the returned draft (a measurement, never charged to
  the policy), at the price they were paid.

Input (prompt) and output (completion) tokens are priced apart. A call of a model the table does not price
costs NULL, never a silent $0; a judge that is no model and made no call (the lexical judge) costs $0
(analysis.replay.costs prices it so). The cached-input price is not applied: the store does not record cached
prompt tokens.

What a stop at round t costs depends on the trajectory and t only, not on the policy: so replay_inputs
prices every round once (:func:`round_costs`: per trajectory, ``lc`` / ``jc`` the loop's and the judge's
dollars paid to round t, ``ec`` the dollars of round t's judgment), and a replay row reads its round's entry
(:func:`cost_columns_sql`) instead of pricing tokens again for each of its 65 policies. The dollars are the
same expression over the same integer tokens as before, so the same doubles.
"""

from __future__ import annotations

from analysis.sql.loader import query  # not via analysis.sql: mypy reads that name as its folder query/

# The per-round scalar columns of replay_inputs' ``r`` CTE the prices read (index t = round t):
# cw / cc / cj cumulative writer / critic / judge tokens, j the judge's of the round, lp / jp cumulative prompt
# tokens of the loop / judge; with batch calls bl / blp / bj / bjp the batch-mode part of cumulative tokens.


def _prev(column: str, t: int) -> str:
    """The cumulative ``column`` at round t - 1 (0 before round 1)."""
    return f"{column}_{t - 1}" if t > 1 else "0"


def loop_tokens(t: int) -> str:
    """The loop's tokens paid to round t: every writer up to t, every critic before t."""
    return f"(cw_{t} + {_prev('cc', t)})"


def _dollars(who: str, tokens: str, prompt: str, factor: str = "") -> str:
    """``tokens`` (``prompt`` of them input) at ``who``'s ("loop": the generation's model, "judge") list prices,
    times ``factor`` (a batch call's 1 - discount)."""
    prices = {"input": f"{who}_input_per_mtok", "output": f"{who}_output_per_mtok"}
    d = query("cost_dollars", tokens=tokens, prompt=prompt, **prices)
    return f"({d}) * {factor}" if factor else d


def _as_paid(who: str, tokens: str, prompt: str, batch_tokens: str, batch_prompt: str) -> str:
    """Each call at its own mode's price: the live part at list price, the batch part discounted."""
    live = _dollars(who, f"({tokens} - {batch_tokens})", f"({prompt} - {batch_prompt})")
    return f"{live} + {_dollars(who, batch_tokens, batch_prompt, f'(1.0 - {who}_batch_discount)')}"


def round_costs(t: int, batch: bool) -> dict[str, str]:
    """name -> the dollars of round t over the ``r`` CTE's columns and the prices: ``lc`` (the loop paid to t, as
    paid), ``jc`` (the judge to t, as paid), ``ec`` (round t's judgment, as paid); with ``batch`` also ``lcl`` /
    ``jcl``, the loop's and judge's to t as if every call had been live (without batch calls lc / jc are that)."""
    loop, loop_p, judge, judge_p = loop_tokens(t), f"lp_{t}", f"cj_{t}", f"jp_{t}"
    ev, ev_p = f"j_{t}", f"(jp_{t} - {_prev('jp', t)})"
    if not batch:
        return {
            "lc": _dollars("loop", loop, loop_p),
            "jc": _dollars("judge", judge, judge_p),
            "ec": _dollars("judge", ev, ev_p),
        }
    be, be_p = f"(bj_{t} - {_prev('bj', t)})", f"(bjp_{t} - {_prev('bjp', t)})"
    return {
        "lc": _as_paid("loop", loop, loop_p, f"bl_{t}", f"blp_{t}"),
        "jc": _as_paid("judge", judge, judge_p, f"bj_{t}", f"bjp_{t}"),
        "ec": _as_paid("judge", ev, ev_p, be, be_p),
        "lcl": _dollars("loop", loop, loop_p),
        "jcl": _dollars("judge", judge, judge_p),
    }


def cost_columns_sql(*, judged: str, batch: bool, paid: str, at: str, x: str = "") -> str:
    """The four cost columns of a replay row that pays the loop to round ``paid`` (and the judge to it where
    ``judged``) and returns round ``at``, read from replay_inputs' per-round dollars (prefix ``x``)."""
    lc, jc = f"{x}lc[{paid}]", f"{x}jc[{paid}]"
    lcl, jcl = (f"{x}lcl[{paid}]", f"{x}jcl[{paid}]") if batch else (lc, jc)

    def charged(loop_part: str, judge_part: str) -> str:
        return f"{loop_part} + CASE WHEN {judged} THEN {judge_part} ELSE 0.0 END"

    return ",\n       ".join(
        [
            f"{charged(lc, jc)} AS operational_cost_usd",
            f"{charged(lcl, jcl)} AS operational_cost_live_usd",
            f"{charged(f'({lcl}) * (1.0 - {x}loop_batch_discount)', f'({jcl}) * (1.0 - {x}judge_batch_discount)')}"
            " AS operational_cost_batch_usd",
            f"{x}ec[{at}] AS evaluation_cost_usd",
        ]
    )
