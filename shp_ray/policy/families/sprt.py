"""Wald's sequential probability ratio test on "the draft agrees with the modal answer so far".

Round t >= 2 is one Bernoulli observation: draft t agrees when its answer is a modal answer of drafts 1..t-1 (a
draft with no answer, or one after drafts that stated none, disagrees). H0: drafts agree at rate ``p0`` (the answer
is not settled); H1: at rate ``p1`` > p0 (settled). The log-likelihood ratio adds log(p1/p0) per agreement and
log((1-p1)/(1-p0)) per disagreement; Wald's bounds, at error rates ``alpha`` (halting as settled when it is not)
and ``beta``: it halts ``settled`` at log((1-beta)/alpha) or above, ``unsettled`` at log(beta/(1-alpha)) or below
(the answers keep changing: further rounds are not expected to settle them). Wald, "Sequential Tests of
Statistical Hypotheses", Ann. Math. Statist. 16 (1945).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from shp_ray.policy.families.agreement import answers, counts, number
from shp_ray.policy.families.family import Family
from shp_ray.policy.families.signals import RoundSignal


def check_params(params: Mapping[str, object]) -> None:
    p0 = number("sprt", params, "p0", 0.0, 1.0)
    p1 = number("sprt", params, "p1", 0.0, 1.0)
    if not p0 < p1:
        raise ValueError(f"sprt: p0 must be below p1 (the agreement rate of a settled answer), got {p0!r} >= {p1!r}")
    for key in ("alpha", "beta"):
        number("sprt", params, key, 0.0, 0.5)


def agreements(found: Sequence[str | None]) -> list[bool]:
    """Per round 2..t: whether its answer is a modal answer of the drafts before it."""
    out = []
    for t in range(1, len(found)):
        n = counts(found[:t])
        top = max(n.values(), default=0)
        said = found[t]
        out.append(said is not None and top > 0 and n[said] == top)
    return out


def check(params: Mapping[str, Any], history: Sequence[RoundSignal], horizon: int) -> str | None:
    """The SPRT's decision after round t: settled, unsettled, or None (observe another draft)."""
    if len(history) < 2:  # round 1 is no observation: nothing to agree with yet
        return None
    p0, p1 = float(params["p0"]), float(params["p1"])
    alpha, beta = float(params["alpha"]), float(params["beta"])
    agree, differ = math.log(p1 / p0), math.log((1.0 - p1) / (1.0 - p0))
    llr = 0.0
    for ok in agreements(answers(history)):  # summed in round order: every executor adds the same floats
        llr += agree if ok else differ
    if llr >= math.log((1.0 - beta) / alpha):
        return "settled"
    if llr <= math.log(beta / (1.0 - alpha)):
        return "unsettled"
    return None


FAMILY = Family(
    kind="sprt",
    label="SPRT (answer agreement)",
    bases={"sprt": {"p0": 0.5, "p1": 0.9, "alpha": 0.1, "beta": 0.1}},
    check=check,
    check_params=check_params,
    needs_answers=True,
)
