"""The halt cascade: one pure, total function shared by every executor.

The live loop, the post-hoc reason derivation and the DuckDB replay all call
:func:`decide` (or a form a property test holds equal to it), so they cannot
disagree about when a trajectory stops or why (the paper's Lemma 2).

Priority order (docs/design.md, "The cascade"):

1. ``critic``   -- the critique of the previous draft, f_{t-1}, starts with "APPROVED"
2. ``entropy``  -- the last k distances are all < eps
3. ``no_gain``  -- t >= warmup and IS_t - IS_{t-1} <= min_gain
4. ``failsafe`` -- t >= max_rounds; unconditional, governed by no flag, also at t = 1

NaN never causes a halt: ``nan < eps`` and ``nan <= min_gain`` are both false.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

from shp_ray.policy.checks import check_int


class Reason(StrEnum):
    """Why the cascade halts, in its priority order: the one list of the stop reasons (each is its own
    string: stored, compared and printed as ``"critic"`` ...; the SQL replay's code for it is its place here)."""

    critic = "critic"
    entropy = "entropy"
    no_gain = "no_gain"
    failsafe = "failsafe"


REASONS: tuple[Reason, ...] = tuple(Reason)
APPROVAL = "APPROVED"


@dataclass(frozen=True)
class HaltConfig:
    """Parameters of the cascade. Defaults are the paper's."""

    eps: float = 0.06
    k: int = 2
    warmup: int = 2
    max_rounds: int = 6
    critic: bool = True
    entropy: bool = True
    gain: bool = True
    min_gain: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.eps, bool) or not isinstance(self.eps, (int, float)):
            raise ValueError(f"HaltConfig.eps must be a number in [0, 2], got {self.eps!r}")
        if not (0.0 <= self.eps <= 2.0):  # also rejects NaN
            raise ValueError(f"HaltConfig.eps must be in [0, 2] (a cosine distance), got {self.eps}")
        check_int("HaltConfig.k", self.k, 1)
        check_int("HaltConfig.warmup", self.warmup, 1)
        check_int("HaltConfig.max_rounds", self.max_rounds, 1)
        for flag in ("critic", "entropy", "gain"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(f"HaltConfig.{flag} must be true or false, got {getattr(self, flag)!r}")
        if (
            isinstance(self.min_gain, bool)
            or not isinstance(self.min_gain, (int, float))
            or not math.isfinite(self.min_gain)
        ):
            raise ValueError(f"HaltConfig.min_gain must be a finite number, got {self.min_gain!r}")

    @property
    def consults_is(self) -> bool:
        """Whether a loop under this config must judge every round (and pay for it)."""
        return self.gain


class Knob(NamedTuple):
    """One parameter of the cascade: a field of :class:`HaltConfig` with its type (float, int or bool)."""

    name: str
    kind: type
    default: object


# The cascade's knobs, in HaltConfig's order: what the policies table, the replay's row and its decide() UDF and the
# sweep's results rows carry, each derived from here, as the ``halting`` config section is from HaltConfig's fields
# (ARCHITECTURE.md, "Adding a cascade knob"): a new knob is one field above, with its check in __post_init__.
_TYPES = typing.get_type_hints(HaltConfig)
KNOBS: tuple[Knob, ...] = tuple(Knob(f.name, _TYPES[f.name], f.default) for f in dataclasses.fields(HaltConfig))


def knob_values(cfg: HaltConfig) -> dict[str, object]:
    """{knob: value} of ``cfg``, each value of its knob's type (an ``eps`` given as the integer 0 is 0.0)."""
    return {k.name: k.kind(getattr(cfg, k.name)) for k in KNOBS}


@dataclass(frozen=True)
class Decision:
    halt: bool
    reason: Reason | None = None


CONTINUE = Decision(False, None)
_HALTS = {reason.value: Decision(True, reason) for reason in Reason}  # by value: a str key looks up faster


def approved(feedback: str | None, marker: str = APPROVAL) -> bool:
    """Critic approval signal: the critique starts with the marker (any case; a prompt preset names it)."""
    return bool(feedback and feedback.strip().upper().startswith(marker.upper()))


def decide(
    t: int,
    distances: Sequence[float],
    scores: Sequence[float],
    feedback: str | None,
    cfg: HaltConfig,
) -> Decision:
    """Decide whether the loop halts after round ``t``.

    ``distances`` holds d_2..d_t, ``scores`` IS_1..IS_t and ``feedback`` the
    previous round's critique f_{t-1} ("" or None at t = 1). Only the tails of
    the histories are read, so any lengths are accepted.
    """
    check_int("round t", t, 1)
    if cfg.critic and approved(feedback):
        return _HALTS["critic"]
    if cfg.entropy and len(distances) >= cfg.k and all(d < cfg.eps for d in distances[-cfg.k :]):
        return _HALTS["entropy"]
    if cfg.gain and t >= cfg.warmup and len(scores) >= 2 and scores[-1] - scores[-2] <= cfg.min_gain:
        return _HALTS["no_gain"]
    if t >= cfg.max_rounds:
        return _HALTS["failsafe"]
    return CONTINUE


class HaltTracker:
    """The cascade's state in a live loop, fed one round at a time.

    Per round t: :meth:`observe` with d_t (None at t = 1) and IS_t, which
    returns the decision; if the loop continues, :meth:`record_feedback` with
    the critique f_t that the Writer will see next.
    """

    def __init__(self, cfg: HaltConfig) -> None:
        self.cfg = cfg
        self.t = 0
        self.distances: list[float] = []
        self.scores: list[float] = []
        self.feedback = ""
        self.decision: Decision | None = None

    def observe(self, distance: float | None, score: float = math.nan) -> Decision:
        if self.decision is not None and self.decision.halt:
            raise RuntimeError(f"the loop already halted at round {self.t} ({self.decision.reason})")
        self.t += 1
        if self.t >= 2:
            self.distances.append(math.nan if distance is None else float(distance))
        self.scores.append(float(score))
        self.decision = decide(self.t, self.distances, self.scores, self.feedback, self.cfg)
        return self.decision

    def record_feedback(self, feedback: str) -> None:
        self.feedback = feedback or ""
