"""The ``policies`` table: one row per policy or sweep cell, with its parameters.

A sweep cell is a row here, never a new generation: the replay crosses this
table with every stored trajectory in one query.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from analysis import sql
from analysis.sql.replay_text import KNOB_COLUMNS
from shp_ray.policy.cascade import HaltConfig, knob_values
from shp_ray.policy.families import params_json
from shp_ray.policy.table import NAMED_CASCADES, Policy, cascade_policy, standard_policies

COLUMNS: tuple[tuple[str, str], ...] = (
    ("policy", "VARCHAR"),
    ("kind", "VARCHAR"),
    *KNOB_COLUMNS,  # the cascade's knobs (shp_ray.policy.cascade.KNOBS)
    ("seed", "BIGINT"),
    ("consults_is", "BOOLEAN"),
    ("params_json", "VARCHAR"),  # a stopping family's own parameters ('{}' for SHP's kinds)
)


def grid_policies(
    eps: Sequence[float],
    k: Sequence[int],
    *,
    warmup: Sequence[int] = (2,),
    max_rounds: Sequence[int] = (6,),
    cascade: str = "shp",
    base: HaltConfig | None = None,
) -> list[Policy]:
    """Cells of an (eps, k, warmup, max_rounds) grid for one named cascade.

    Names read ``{cascade}@eps=0.06,k=2,w=2,T=6`` so a cell says what it is.
    """
    if cascade not in NAMED_CASCADES:
        raise ValueError(f"grid cascade must be one of {list(NAMED_CASCADES)}, got {cascade!r}")
    base = base or HaltConfig()
    cells = []
    for e, kk, w, t in itertools.product(eps, k, warmup, max_rounds):
        cfg = replace(base, eps=float(e), k=int(kk), warmup=int(w), max_rounds=int(t))
        name = f"{cascade}@eps={float(e):g},k={kk},w={w},T={t}"
        cells.append(cascade_policy(name, cfg, *NAMED_CASCADES[cascade]))
    return cells


def default_policies() -> list[Policy]:
    """Every policy of docs/design.md at the paper's defaults (ablation cells included)."""
    return standard_policies()


def policy_row(p: Policy) -> dict[str, Any]:
    return {
        "policy": p.name,
        "kind": p.kind,
        **knob_values(p.halt),
        "seed": p.seed,
        "consults_is": p.consults_is,
        "params_json": params_json(p.param_dict),
    }


def policies_sql(policies: Iterable[Policy]) -> str:
    """CREATE the ``policies`` temp table from Policy objects (names must be unique)."""
    rows = [policy_row(p) for p in policies]
    names = [r["policy"] for r in rows]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"policy names must be unique; repeated: {dupes}")
    # The names as an ENUM (in sorted order, so ORDER BY policy sorts as text): every replay row carries its
    # policy's name through the cross join and out to Arrow, and a 1-byte code in place of a string such as
    # 'shp@eps=0.02,k=1,w=2,T=6' takes ~0.4 s off a 6.5M-row replay (BENCHMARKS.md). It compares, LIKEs and
    # concatenates as text; a union with text (the families' rows) is text.
    policy_type = "ENUM(" + ", ".join(sql.quote(n) for n in sorted(names)) + ")" if names else "VARCHAR"
    return sql.policies_table(tuple((c, policy_type if c == "policy" else t) for c, t in COLUMNS), rows)
