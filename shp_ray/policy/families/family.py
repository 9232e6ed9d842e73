"""What a stopping family is, as one value: the contract every family module fulfils.

A family module (semantic.py, gain_model.py, verifier.py, ...) holds pure functions over
:class:`.signals.RoundSignal` histories and ends with one ``FAMILY = Family(...)``;
:mod:`.registry` lists the modules. From that one value the policy table learns its
policy names and parameters, the engine its halting rule and cap reason, the live
Stopper whether to embed critiques, and the DuckDB replay and the report its labels.
ARCHITECTURE.md walks through adding one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shp_ray.policy.families.signals import RoundSignal

Params = Mapping[str, object]


def _failsafe(params: Params) -> str:
    return "failsafe"


def _never(params: Params) -> bool:
    return False


@dataclass(frozen=True)
class Family:
    kind: str  # the policy kind stored in every replay row (policies.kind)
    label: str  # how reports name it
    # Policy name -> default parameters; each name is a policy of the table at those defaults.
    bases: Mapping[str, Params]
    # (params, history of rounds 1..t, horizon T_max) -> the reason to halt at round t, or None.
    check: Callable[[Params, Sequence[RoundSignal], int], str | None]
    # Raises ValueError naming the parameter at fault (called for every name and override).
    check_params: Callable[[Params], None]
    # The reason written when nothing halted before the cap (the failsafe, unless the family says otherwise).
    cap_reason: Callable[[Params], str] = _failsafe
    # Whether round t needs the embedding of the critique f_{t-1} (the live Stopper embeds it only then).
    needs_critique: Callable[[Params], bool] = _never
    # Whether its reasons are outcomes (verified / oscillation / ...) rather than why it stopped.
    outcomes: bool = False
    # Whether best-round selectors (+best=medoid ...) apply; a family returning a checked draft says no.
    selectable: bool = True
    # Whether it reads each draft's extracted answer (RoundSignal.answer): a store without stored answers
    # (draft_answers) leaves it out of the replay, never runs it on unknown answers.
    needs_answers: bool = False
    # Whether it reads each draft's token log-probability summary (RoundSignal.confidence): a store without them
    # (draft_logprobs) leaves it out of the replay, never runs it on zeros.
    needs_logprobs: bool = False
    # Optional, for speed only: ``check`` over many trajectories at once (.columns.SignalColumns), as
    # (params, columns, horizon) -> [(reason, hit)] in ``check``'s priority order, hit[b, t-1] being
    # whether ``check`` would name that reason at round t of trajectory b; None for params it does not
    # cover. Without it (or on None) the DuckDB replay runs ``check`` round by round. It must agree
    # with ``check`` exactly: tests/test_family_columns.py proves the shipped ones do.
    batch: Callable[[Params, Any, int], list[tuple[str, Any]] | None] | None = None
    doc: str = field(default="", compare=False)
