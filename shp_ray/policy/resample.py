"""Resampling instead of revising at equal compute: the self-repair literature's control.

Olausson et al. ("Is Self-Repair a Silver Bullet for Code Generation?", ICLR 2024) judge self-repair against drawing
fresh samples from the first prompt with the same budget of tokens: repair pays for the feedback and the longer
prompts, so its gains are modest and sometimes absent once the budget is held equal. Over a store that holds a
revising generation and its ``critic=none`` control (every round a fresh sample of the first prompt, the same tasks,
epochs and seeds), ``resample_equal_compute`` is that control for each trajectory that revises:

- the budget: the operational tokens the revising trajectory paid to run every round (its ``fixed_k{T}``);
- the drafts drawn: as many of the same task and epoch's fresh drafts, in their order, as that budget pays for (the
  loop's tokens to round n at most the budget; at least the first, at most the T the store holds);
- the draft returned: the first drawn draft the loop's own verifier accepts (all visible tests pass: the check the
  revising loop reads too), else the last drawn; its outcome is scored by the ground truth (hidden_pass).

It is a control, not a stopping rule: it reads another generation, so it only replays (in SQL,
``analysis/sql/replay/scores/resample_control.sql``), and this function is its reference, held equal by
tests/test_resample_control.py.
"""

from __future__ import annotations

from collections.abc import Sequence

NAME = "resample_equal_compute"
REASON = "resampled"  # its replay rows' reason: the kind "control" in the correctness tables
KIND = "control"


def equal_compute(budget: float, drawn_tokens: Sequence[float], verified: Sequence[bool]) -> tuple[int, int]:
    """(n, returned): how many fresh drafts ``budget`` tokens buy, given the loop's tokens paid to each round of the
    resampling trajectory (``drawn_tokens[t-1]``: cumulative, rounds 1..T), and the round (1-based) of the draft
    returned: the first of drafts 1..n that ``verified`` accepts, else draft n."""
    if not drawn_tokens:
        raise ValueError("resample_equal_compute: no fresh draft to draw")
    n = max(1, sum(1 for c in drawn_tokens if c <= budget))  # cumulative, so the affordable ones are a prefix
    first = next((t for t in range(1, n + 1) if t <= len(verified) and verified[t - 1]), n)
    return n, first
