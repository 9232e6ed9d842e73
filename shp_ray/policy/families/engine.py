"""One round-by-round executor for every stopping family (live, reference and DuckDB share it).

:class:`FamilyRun` turns round inputs into :class:`.signals.RoundSignal` and asks
the policy's family whether to halt; the failsafe halts at ``cap``. The live
Stopper feeds it as drafts arrive, the reference executor and the DuckDB UDF
feed it a stored trajectory, so all three reach the same (tau, reason, selected).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from shp_ray.policy.families import best_round
from shp_ray.policy.families.registry import family
from shp_ray.policy.families.signals import RoundSignal, SignalState

__all__ = ["FamilyRun", "params_json", "run_signals", "run_trajectory", "trajectory_signals"]


class FamilyRun:
    """The state of one family policy over one trajectory."""

    def __init__(
        self, kind: str, params: Mapping[str, object], *, cap: int, horizon: int, contexts: Sequence[str] = ()
    ) -> None:
        self.family = family(kind)
        if cap < 1:
            raise ValueError(f"cap must be >= 1, got {cap}")
        self.kind, self.params, self.cap, self.horizon = kind, dict(params), cap, horizon
        self.signals = SignalState(contexts, verifier=str(self.params.get("verifier", "qa")))
        self.reason: str | None = None

    @property
    def history(self) -> list[RoundSignal]:
        return self.signals.history

    def step(
        self,
        draft: str,
        embedding: np.ndarray,
        critique: np.ndarray | None = None,
        tokens: int = 0,
        verified: bool | None = None,
        answer: str | None = None,
        confidence: Mapping[str, float] | None = None,
    ) -> str | None:
        """Feed round t; the halting reason (outcome for verifier-first), or None to continue. ``verified``: the
        loop's own check of the draft (SignalState.push), in place of the verifier's; ``answer``: the answer it
        states; ``confidence``: its token log-probability summaries."""
        if self.reason is not None:
            raise RuntimeError(f"the loop already halted at round {len(self.history)} ({self.reason})")
        return self._decide(self.signals.push(draft, embedding, critique, tokens, verified, answer, confidence))

    def step_signal(self, sig: RoundSignal) -> str | None:
        """Feed round t's precomputed signal (signals are causal: round t's reads rounds <= t only)."""
        if self.reason is not None:
            raise RuntimeError(f"the loop already halted at round {len(self.history)} ({self.reason})")
        if sig.t != len(self.history) + 1:
            raise ValueError(f"expected the signal of round {len(self.history) + 1}, got round {sig.t}")
        self.signals.history.append(sig)
        return self._decide(sig)

    def _decide(self, sig: RoundSignal) -> str | None:
        reason = self.family.check(self.params, self.history, self.horizon)
        if reason is None and sig.t >= self.cap:
            reason = self.family.cap_reason(self.params)
        self.reason = reason
        return reason

    @property
    def selected(self) -> int:
        """The round whose draft is returned (best-round selection; verifier-first returns the last)."""
        return best_round.select(str(self.params.get("select", "last")), self.history)

    @property
    def verified_final(self) -> bool:
        return bool(self.history and self.history[self.selected - 1].verified)


@dataclass(frozen=True)
class StoredRounds:
    """A stored trajectory as the family engine reads it: per round the draft, its embedding, the embedding of
    the critique the Writer saw before drafting it (None at round 1) and the round's tokens; the task's
    ``contexts``; ``verdicts``: per round, the loop's own check of the draft (None: ask the verifier); ``answers``: per
    round, the answer the draft states (draft_answers; None: none stored); ``confidences``: per round, the draft's
    token log-probability summaries (draft_logprobs; None: none stored)."""

    drafts: Sequence[str]
    embeddings: Sequence[np.ndarray]
    critiques: Sequence[np.ndarray | None]
    tokens: Sequence[int]
    contexts: Sequence[str] = ()
    verdicts: Sequence[bool | None] | None = None
    answers: Sequence[str | None] | None = None
    confidences: Sequence[Mapping[str, float] | None] | None = None

    def at(self, t: int) -> tuple[bool | None, str | None, Mapping[str, float] | None]:
        """Round t+1's stored evidence beside its draft: (the loop's verdict, the stated answer, the confidence)."""
        return _nth(self.verdicts, t), _nth(self.answers, t), _nth(self.confidences, t)


def _nth(seq: Sequence[object] | None, t: int) -> Any:
    return None if seq is None else seq[t]


def run_trajectory(
    kind: str, params: Mapping[str, object], rounds: StoredRounds, *, cap: int, horizon: int
) -> tuple[int, str, int, bool]:
    """(tau, reason, selected round, verified_final) over a stored trajectory (cap <= its depth)."""
    run = FamilyRun(kind, params, cap=cap, horizon=horizon, contexts=rounds.contexts)
    for t in range(cap):
        drafted = (rounds.drafts[t], rounds.embeddings[t], rounds.critiques[t], rounds.tokens[t])
        if run.step(*drafted, *rounds.at(t)) is not None:
            break
    return len(run.history), str(run.reason), run.selected, run.verified_final


def trajectory_signals(rounds: StoredRounds, verifier: str = "qa") -> list[RoundSignal]:
    """Every round's signal of a stored trajectory, computed once for all the policies replaying it."""
    state = SignalState(rounds.contexts, verifier=verifier)
    for t in range(len(rounds.drafts)):
        state.push(rounds.drafts[t], rounds.embeddings[t], rounds.critiques[t], rounds.tokens[t], *rounds.at(t))
    return state.history


def run_signals(
    kind: str, params: Mapping[str, object], signals: Sequence[RoundSignal], *, cap: int, horizon: int
) -> tuple[int, str, int, bool]:
    """:func:`run_trajectory` over precomputed signals (the DuckDB UDF shares them across policies)."""
    run = FamilyRun(kind, params, cap=cap, horizon=horizon)
    for t in range(cap):
        if run.step_signal(signals[t]) is not None:
            break
    return len(run.history), str(run.reason), run.selected, run.verified_final


def params_json(params: Mapping[str, object]) -> str:
    return json.dumps(dict(params), sort_keys=True, separators=(",", ":"))
