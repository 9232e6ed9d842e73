"""Answer run length: halt when the current draft's answer has appeared ``r`` times in a row.

The run-length rule of early-stopping chain-of-thought work (ES-CoT: stop once the same step answer has run long
enough; ~41% fewer tokens at near-equal accuracy). At ``r = w`` it decides as ``answer_stable@w`` does (the last
r drafts state one answer); the two are kept apart as their papers name them, with their own defaults.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shp_ray.policy.checks import check_int
from shp_ray.policy.families.agreement import answers, run_length
from shp_ray.policy.families.family import Family
from shp_ray.policy.families.signals import RoundSignal


def check_params(params: Mapping[str, object]) -> None:
    check_int("answer_runlength: r", params.get("r"), 2)


def check(params: Mapping[str, Any], history: Sequence[RoundSignal], horizon: int) -> str | None:
    """Halt at round t when draft t's answer is the answer of its last r drafts in a row (None never runs)."""
    return "answer_run" if run_length(answers(history)) >= int(params["r"]) else None


FAMILY = Family(
    kind="answer_runlength",
    label="answer run length",
    bases={"answer_runlength": {"r": 3}},
    check=check,
    check_params=check_params,
    needs_answers=True,
)
