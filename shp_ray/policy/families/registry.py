"""The registered stopping families, and the policy names and parameters they define.

    sim_threshold, window_mean, dynamic_threshold, drift, consensus   (semantic early stopping)
    gain_model                                                        (learned one-step gain)
    verifier, oscillation, budget                                     (verifier-first termination)
    best_medoid, best_grounded, best_verified                         (best-round selection over a run to T_max)
    answer_stable, answer_runlength, adaptive_consistency, sprt       (answer agreement: each draft's extracted answer)
    confidence                                                        (token confidence: each draft's log-probabilities)

A name may carry parameter overrides and a best-round selector:
``sim_threshold@threshold=0.97,n=2`` or ``window_mean+best=medoid``.

Registering a family is one line in :data:`FAMILIES` (see ARCHITECTURE.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from shp_ray.policy.families import (
    adaptive_consistency,
    answer_runlength,
    answer_stable,
    best_round,
    confidence,
    gain_model,
    semantic,
    sprt,
    verifier,
)
from shp_ray.policy.families.family import Family

# kind -> Family, and policy name -> (kind, default params); filled by register() below.
FAMILIES: dict[str, Family] = {}
FAMILY_BASES: dict[str, tuple[str, dict[str, object]]] = {}


def register(fam: Family) -> Family:
    """Make a family's policies known to the policy table, the engine, the SQL replay and the reports.

    Shipped families are registered below; a user's own family (a module of pure functions
    ending in ``FAMILY = Family(...)``) is registered the same way before the replay runs.
    """
    if fam.kind in FAMILIES or fam.kind in ("cascade", "random", "oracle"):
        raise ValueError(f"stopping family kind {fam.kind!r} is already registered")
    clash = sorted(set(fam.bases) & set(FAMILY_BASES))
    if clash:
        raise ValueError(f"{fam.kind}: policy names {clash} already belong to another family")
    for params in fam.bases.values():
        fam.check_params({**params, "select": "last"})  # a default that fails its own check is a bug here
    FAMILIES[fam.kind] = fam
    FAMILY_BASES.update({name: (fam.kind, {**params, "select": "last"}) for name, params in fam.bases.items()})
    return fam


def family(kind: str) -> Family:
    try:
        return FAMILIES[kind]
    except KeyError:
        raise ValueError(f"not a stopping family: {kind!r}; known: {', '.join(FAMILIES)}") from None


# The registration of the shipped families, in the order reports list them.
for _fam in (
    semantic.FAMILY,
    gain_model.FAMILY,
    verifier.FAMILY,
    answer_stable.FAMILY,
    answer_runlength.FAMILY,
    adaptive_consistency.FAMILY,
    sprt.FAMILY,
    confidence.FAMILY,
):
    register(_fam)
# Best-round selection: run a semantic cap to T_max, return the best draft by a judge-free score.
FAMILY_BASES.update(
    {f"best_{s}": ("semantic", {"mode": "cap", "select": s}) for s in best_round.SELECTORS if s != "last"}
)


_NAME = re.compile(r"(?P<base>[a-z_]+)(?:\+best=(?P<sel>[a-z]+))?(?:@(?P<over>.+))?")


def _value(text: str) -> object:
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text.strip()


def family_spec(name: str) -> tuple[str, dict[str, object]] | None:
    """(kind, params) of a family policy name, or None if the name is not a family's."""
    m = _NAME.fullmatch(name)
    if not m or m["base"] not in FAMILY_BASES:
        return None
    kind, defaults = FAMILY_BASES[m["base"]]
    params = dict(defaults)
    if m["sel"]:
        if not FAMILIES[kind].selectable:
            raise ValueError(f"{name}: {FAMILIES[kind].label} returns the checked (last) draft; no +best= selector")
        best_round.check_selector(m["sel"])
        params["select"] = m["sel"]
    if m["over"]:
        for item in m["over"].split(","):
            key, sep, val = item.partition("=")
            if not sep or key not in params or key in ("mode", "select"):
                settable = sorted(k for k in params if k not in ("mode", "select", "model"))
                raise ValueError(f"{name}: cannot set {key!r}; settable: {', '.join(settable)}")
            params[key] = _value(val)
    check_params(kind, params, name)
    return kind, params


def check_params(kind: str, params: Mapping[str, object], name: str = "") -> None:
    where = f"{name}: " if name else ""
    try:
        family(kind).check_params(params)
        best_round.check_selector(str(params.get("select", "last")))
    except (KeyError, ValueError) as exc:
        raise ValueError(f"{where}{exc}") from None


def family_names() -> list[str]:
    """Every family policy at its defaults (the ``families`` keyword of replay.policies)."""
    return list(FAMILY_BASES)


def needs_answers(kind: str) -> bool:
    """Whether the family ``kind`` reads each draft's extracted answer (a store without answers leaves it out)."""
    return family(kind).needs_answers


def needs_logprobs(kind: str) -> bool:
    """Whether the family ``kind`` reads each draft's token log-probabilities (a store without them leaves it out)."""
    return family(kind).needs_logprobs
