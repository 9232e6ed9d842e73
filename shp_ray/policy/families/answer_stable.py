"""Answer stability: halt when the answers of the last ``w`` drafts are the same.

Early-Stopping Self-Consistency (Li et al., ICLR 2024) samples in windows and stops once a window's answers all
agree: 80% fewer samples on GSM8K at equal accuracy. Over a Writer -> Critic loop the window is the last ``w``
drafts; a draft with no answer never agrees, so a window holding one never halts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shp_ray.policy.checks import check_int
from shp_ray.policy.families.agreement import answers, run_length
from shp_ray.policy.families.family import Family
from shp_ray.policy.families.signals import RoundSignal


def check_params(params: Mapping[str, object]) -> None:
    check_int("answer_stable: w", params.get("w"), 2)


def check(params: Mapping[str, Any], history: Sequence[RoundSignal], horizon: int) -> str | None:
    """Halt at round t when drafts t-w+1..t state one answer: the last draft's answer (None is no answer) has run
    at least w drafts."""
    return "answer_stable" if run_length(answers(history)) >= int(params["w"]) else None


FAMILY = Family(
    kind="answer_stable",
    label="answer stability",
    bases={"answer_stable": {"w": 2}},
    check=check,
    check_params=check_params,
    needs_answers=True,
)
