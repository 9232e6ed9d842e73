"""Verifier-first termination: a deterministic check is the only exit that yields ``verified``.

Exits, checked in this order after each round t (the ``outcome`` column):

1. ``verified``    the verifier (pluggable; default: the QA check of :mod:`.signals`) accepts draft t
2. ``oscillation`` draft t's canonical hash equals one of the previous ``cycle`` drafts' hashes
                   (kept in a bounded history of ``history`` hashes): the loop is cycling
3. ``budget``      cumulative operational tokens reached ``budget``: abort
4. ``cap``         t reached T_max (applied by the executor)

Every exit but ``verified`` is a failure mode: the returned draft did not pass the verifier
(``verified_final`` says so), and it is never labelled verified.

Where the loop checks its drafts itself, its verdict is the verifier: a code loop runs each draft against the
task's visible tests and stores their pass rate as the score ``visible_pass`` (:data:`VISIBLE_TESTS_SCORE`). On a
generation that has that score, the replay (analysis.replay.family_replay) hands each round's verdict in, all visible
tests passing (1.0) or not (anything else, unknown included), in place of the named verifier: ``verified`` then
means "the visible tests pass", and ``best_verified`` returns the latest draft that passes them. Elsewhere the
named verifier (default: the QA check) decides, as before. The live Stopper takes the same verdict through
``observe(..., verified=...)``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from shp_ray.policy.checks import check_int
from shp_ray.policy.families.family import Family
from shp_ray.policy.families.signals import RoundSignal

OUTCOMES = ("verified", "oscillation", "budget", "cap")
VISIBLE_TESTS_SCORE = "visible_pass"  # the stored score whose value 1.0 verifies a draft (a code loop's visible tests)
DEFAULTS: dict[str, dict[str, object]] = {
    "verifier": {"verify": True, "oscillation": False, "budget": 0, "cycle": 2, "history": 10, "verifier": "qa"},
    "oscillation": {"verify": True, "oscillation": True, "budget": 0, "cycle": 2, "history": 10, "verifier": "qa"},
    "budget": {"verify": True, "oscillation": True, "budget": 4000, "cycle": 2, "history": 10, "verifier": "qa"},
}


def check_params(params: Mapping[str, object]) -> None:
    cycle, history, _ = (
        check_int(f"verifier-first: {key}", params.get(key), 0) for key in ("cycle", "history", "budget")
    )
    if cycle < 1 or history < 1:
        raise ValueError("verifier-first: cycle and history must be >= 1")
    if cycle > history:
        raise ValueError(f"verifier-first: cycle {cycle} exceeds the history of {history}")


class OscillationDetector:
    """Bounded history of canonical hashes; a repeat within ``cycle`` rounds is a cycle."""

    def __init__(self, cycle: int = 2, history: int = 10) -> None:
        self.cycle = cycle
        self.hashes: deque[str] = deque(maxlen=history)

    def seen(self, canon: str) -> bool:
        """Whether ``canon`` repeats one of the last ``cycle`` drafts; then remember it."""
        hit = canon in list(self.hashes)[-self.cycle :]
        self.hashes.append(canon)
        return hit


def check(params: Mapping[str, Any], history: Sequence[RoundSignal], horizon: int = 0) -> str | None:
    """The outcome that ends the loop at the last round of ``history``, or None (pure)."""
    cur = history[-1]
    if params["verify"] and cur.verified:
        return "verified"
    if params["oscillation"]:
        det = OscillationDetector(int(params["cycle"]), int(params["history"]))
        for s in history[:-1]:
            det.seen(s.canon)
        if det.seen(cur.canon):
            return "oscillation"
    if params["budget"] and cur.spent >= int(params["budget"]):
        return "budget"
    return None


def batch_check(params: Mapping[str, Any], cols: Any, horizon: int = 0) -> list[tuple[str, np.ndarray]]:
    """:func:`check` over (trajectory, round) columns (.columns.SignalColumns): its exits in its order."""
    rules = []
    if params["verify"]:
        rules.append(("verified", cols.verified(str(params.get("verifier", "qa")))))
    if params["oscillation"]:
        # the detector holds the last ``history`` >= ``cycle`` hashes: a repeat of rounds t-cycle..t-1
        canon, hit = cols.canon, np.zeros((cols.B, cols.T), dtype=bool)
        for k in range(1, min(int(params["cycle"]), cols.T - 1) + 1):
            hit[:, k:] |= canon[:, k:] == canon[:, :-k]
        rules.append(("oscillation", hit))
    if params["budget"]:
        rules.append(("budget", cols.spent >= int(params["budget"])))
    return rules


FAMILY = Family(
    kind="verifier",
    label="verifier-first",
    bases=DEFAULTS,
    check=check,
    check_params=check_params,
    cap_reason=lambda params: "cap",
    outcomes=True,
    selectable=False,  # it returns the verified (last) draft
    batch=batch_check,
    reads=("a verifier (the visible tests, else the QA check)",),
)
