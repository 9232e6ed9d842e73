"""``make demo`` (until the Hydra pipeline lands): replay every policy over real trajectories.

The trajectory is Table I of the SHP paper ("Are both Cypress and Ajuga
genera?"): d_t and IS_t as published. Only stop rounds, reasons and IS are
shown; the paper does not publish that trajectory's token counts.
"""

from __future__ import annotations

import math

from shp_ray.policy.cascade import HaltConfig
from shp_ray.policy.reference import replay
from shp_ray.policy.table import standard_policies
from shp_ray.policy.trajectory import Round, Trajectory

TABLE_I = Trajectory(
    scenario_id="paper_table_I",
    rounds=tuple(
        Round(round=t, distance=d, is_score=s, feedback="Revise: be more specific." if t < 6 else "")
        for t, d, s in [
            (1, math.nan, 0.54),
            (2, 0.144, 0.62),
            (3, 0.027, 0.64),
            (4, 0.007, 0.62),
            (5, 0.003, 0.66),
            (6, math.nan, math.nan),  # not published: NaN never triggers a halt
        ]
    ),
)


def main() -> None:
    cfg = HaltConfig()
    print("shp-ray demo: replaying every policy over the SHP paper's Table I trajectory")
    print(f"(eps={cfg.eps}, k={cfg.k}, warmup={cfg.warmup}, max_rounds={cfg.max_rounds}; d_t and IS_t as published)\n")
    print(f"{'policy':<18}{'stop_round':>10}  {'reason':<9}{'final_IS':>9}")
    for policy in standard_policies(cfg):
        out = replay(policy, TABLE_I)
        print(f"{policy.name:<18}{out.stop_round:>10}  {out.reason:<9}{out.final_is:>9.2f}")
    print("\nThe generation pipeline (Ray + embedded LLM + Parquet + DuckDB) replaces this demo when it lands.")


if __name__ == "__main__":
    main()
