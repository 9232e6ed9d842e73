"""A generated trajectory as the replay executors see it: per-round signals and token costs."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Round:
    """Round t of one trajectory.

    ``feedback`` is f_t, the critique of THIS round's draft ("" at the last
    generated round, where no critic ran); the cascade at round t+1 reads it.
    ``distance`` is d_t (NaN at round 1), ``is_score`` IS_t (NaN if unjudged).
    Token counts are the provider's prompt + completion usage for that call.
    """

    round: int
    distance: float = math.nan
    is_score: float = math.nan
    feedback: str = ""
    writer_tokens: int = 0
    critic_tokens: int = 0
    judge_tokens: int = 0
    draft: str = ""
    # Optional inputs of the other stopping families (shp_ray.policy.families): the draft's
    # embedding e_t and the embedding of THIS round's critique f_t (None when unknown).
    embedding: np.ndarray | None = field(default=None, compare=False, repr=False)
    feedback_embedding: np.ndarray | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Trajectory:
    scenario_id: str
    rounds: tuple[Round, ...]
    gen_id: str = ""
    meta: dict[str, object] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if not self.rounds:
            raise ValueError(f"trajectory {self.scenario_id!r} has no rounds")
        got = [r.round for r in self.rounds]
        if got != list(range(1, len(got) + 1)):
            raise ValueError(f"trajectory {self.scenario_id!r}: rounds must be 1..T in order, got {got}")

    @property
    def depth(self) -> int:
        """T: how many rounds were generated."""
        return len(self.rounds)

    def distances(self, t: int) -> list[float]:
        """d_2..d_t."""
        return [r.distance for r in self.rounds[1:t]]

    def scores(self, t: int) -> list[float]:
        """IS_1..IS_t."""
        return [r.is_score for r in self.rounds[:t]]

    def feedback_before(self, t: int) -> str:
        """f_{t-1}: the critique the Writer saw before drafting round t."""
        return self.rounds[t - 2].feedback if t >= 2 else ""
