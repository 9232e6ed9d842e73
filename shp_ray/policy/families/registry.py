"""Policy names of the stopping families and their parameters.

    sim_threshold, window_mean, dynamic_threshold, drift, consensus   (semantic early stopping)
    gain_model                                                        (learned one-step gain)
    verifier, oscillation, budget                                     (verifier-first termination)
    best_medoid, best_grounded, best_verified                         (best-round selection over a run to T_max)

A name may carry parameter overrides and a best-round selector:
``sim_threshold@threshold=0.97,n=2`` or ``window_mean+best=medoid``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from shp_ray.policy.families import best_round, semantic, verifier
from shp_ray.policy.families.engine import FAMILY_KINDS

FAMILY_BASES: dict[str, tuple[str, dict[str, object]]] = {
    **{m: ("semantic", {"mode": m, **semantic.DEFAULTS[m], "select": "last"}) for m in semantic.REASONS},
    "gain_model": ("gain_model", {"c": 0.0, "model": None, "select": "last"}),
    **{n: ("verifier", {**d, "select": "last"}) for n, d in verifier.DEFAULTS.items()},
    **{f"best_{s}": ("semantic", {"mode": "cap", "select": s}) for s in best_round.SELECTORS if s != "last"},
}
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
        if kind == "verifier":
            raise ValueError(f"{name}: verifier-first returns the verified (last) draft; no +best= selector")
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
        if kind == "semantic":
            semantic.check_params(str(params["mode"]), params)
        elif kind == "verifier":
            verifier.check_params(params)
        elif kind == "gain_model":
            c = params.get("c")
            if isinstance(c, bool) or not isinstance(c, (int, float)):
                raise ValueError(f"c must be a number, got {c!r}")
        else:
            raise ValueError(f"unknown family kind {kind!r}; known: {', '.join(FAMILY_KINDS)}")
        best_round.check_selector(str(params.get("select", "last")))
    except (KeyError, ValueError) as exc:
        raise ValueError(f"{where}{exc}") from None


def family_names() -> list[str]:
    """Every family policy at its defaults (the ``families`` keyword of replay.policies)."""
    return list(FAMILY_BASES)
