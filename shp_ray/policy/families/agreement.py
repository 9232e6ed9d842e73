"""What the answer-based families share: the answers a trajectory's drafts stated, counted, and their checks.

Each draft's answer is its task's extractor's reading (``RoundSignal.answer``: the lenient QA answer normalised,
a code draft's AST hash, a user's ``answer.target``), stored once per draft in ``draft_answers``. A draft with
no answer (None) never counts as agreeing with anything, None included.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from shp_ray.policy.checks import check_finite
from shp_ray.policy.families.signals import RoundSignal


def answers(history: Sequence[RoundSignal]) -> list[str | None]:
    return [s.answer for s in history]


def counts(found: Sequence[str | None]) -> Counter[str]:
    """How often each stated answer occurs (a draft with none is not counted)."""
    return Counter(a for a in found if a is not None)


def run_length(found: Sequence[str | None]) -> int:
    """How many drafts in a row, up to the last, state the last draft's answer (0 when it states none)."""
    last, n = found[-1] if found else None, 0
    if last is None:
        return 0
    for a in reversed(found):
        if a != last:
            break
        n += 1
    return n


def number(family: str, params: Mapping[str, object], key: str, lo: float, hi: float, *, open_: bool = True) -> float:
    """params[key] as a finite number in (lo, hi) (``open_``) or [lo, hi]; ValueError naming it otherwise."""
    v = check_finite(f"{family}: {key}", params.get(key))
    inside = lo < v < hi if open_ else lo <= v <= hi
    if not inside:
        where = f"({lo:g}, {hi:g})" if open_ else f"[{lo:g}, {hi:g}]"
        raise ValueError(f"{family}: {key} must be in {where}, got {params.get(key)!r}")
    return v
