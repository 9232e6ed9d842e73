"""RESULTS.md's section on a run where revising can matter: feedback against resampling, from one store.

    python -m sweeps.revise_results results/humaneval-revise/store [--out FILE]

The store holds two generations of the same tasks, epochs and rounds: one whose Writer revises on a Critic's report
(``+sweep=humaneval_revise``: the public tests' report) and the resampling control (the same with
``generation.critic=none``: every round a fresh sample of the first prompt). Each is rendered as the code section is
(:mod:`sweeps.code_results`: pass by round, changes among drafts, pass_at_stop per policy with its tests, the oracle's
gap, the MDE), then the two are compared policy by policy at equal compute (:mod:`analysis.stats.feedback`).

A store still being generated renders what it holds and says how much: the trajectories of each generation against
the tasks x epochs its config plans, and the pairs the comparison could use.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from analysis import ReplayScope, connect
from analysis.errors import AnalysisError
from analysis.report.correctness import feedback_lines, is_known
from analysis.stats import correctness, feedback
from shp_ray.generation.humaneval import N_PROBLEMS
from storage.parts import Store, StoreUnusable, open_store
from sweeps.code_results import ORACLE_IS, emit, store_arg
from sweeps.code_results import render as render_code

HEADING = "## Code, revising on feedback against drawing again: HumanEval, public and private tests"
RESAMPLING = "none"  # generation.critic of the resampling control


def _critic(gen: dict) -> str:
    config = json.loads(gen.get("config_json") or "{}")
    return str((config.get("generation") or {}).get("critic") or (config.get("gen_id_parts") or {}).get("critic"))


def _epochs(gen: dict) -> int:
    return int((json.loads(gen.get("config_json") or "{}").get("generation") or {}).get("epochs") or 1)


def _pair(store: Store) -> tuple[dict, dict, dict[str, int]]:
    """(the feedback generation, the resampling one, trajectories stored per gen_id)."""
    try:
        s = open_store(store)
        gens = s.read("generations").to_pylist()
        rounds = s.read("rounds", columns=["gen_id", "scenario_id"]).to_pylist()
    except StoreUnusable as exc:
        raise AnalysisError(str(exc)) from None
    resampling = [g for g in gens if _critic(g) == RESAMPLING]
    revising = [g for g in gens if _critic(g) != RESAMPLING]
    if len(resampling) != 1 or len(revising) != 1:
        said = ", ".join(f"{g['gen_id'][:12]} (critic {_critic(g)})" for g in gens) or "none"
        raise AnalysisError(f"store {store.root}: needs one generation with a Critic and one with critic {RESAMPLING} "
                            f"(generations: {said})")  # fmt: skip
    held: dict[str, set[str]] = {}
    for r in rounds:
        held.setdefault(r["gen_id"], set()).add(r["scenario_id"])
    return revising[0], resampling[0], {g: len(ids) for g, ids in held.items()}


def _status(gens: tuple[dict, dict], stored: dict[str, int]) -> str:
    planned = N_PROBLEMS * _epochs(gens[0])
    counts = [f"{stored.get(g['gen_id'], 0)} with critic `{_critic(g)}`" for g in gens]
    done = all(stored.get(g["gen_id"], 0) >= planned for g in gens)
    head = "Complete" if done else "**A partial store: the run is still resuming**"
    return (f"{head}: {' and '.join(counts)} of the {planned} trajectories ({N_PROBLEMS} problems x "
            f"{_epochs(gens[0])} epochs) each generation plans; every table reads only what is stored.")  # fmt: skip


def render(store: Store) -> str:
    revising, resampling, stored = _pair(store)
    con = connect(ReplayScope(store, policies=correctness.code_policies(int(revising["max_rounds"]))))
    try:
        score = correctness.pick_score(con, None)
        if score is None:
            raise AnalysisError(f"store {store.root} has no pass/fail score (hidden_pass)")
        rows = feedback.compare(con, score, revising["gen_id"], resampling["gen_id"])
        if not is_known(correctness.compare_pass(con, score)):  # no judge scored a draft: no IS oracle to compare
            rows = [r for r in rows if r["policy"] != ORACLE_IS]
    finally:
        con.close()
    out = [
        HEADING,
        "",
        f"Rendered by `python -m sweeps.revise_results {store.root}`. {_status((revising, resampling), stored)} "
        f"Both generations run the same Writer, prompts, tasks and seeds; one revises on the Critic's report, the "
        f"other draws every round afresh from the first prompt, so both pay the same Writer calls.",
        "",
    ]
    for gen, title in ((revising, f"With feedback (critic `{_critic(revising)}`)"),
                       (resampling, "Resampling (critic `none`: no feedback)")):  # fmt: skip
        if not stored.get(gen["gen_id"]):
            out += [f"### {title}", "", "No trajectory of this generation is stored yet.", ""]
            continue
        body = render_code(store, score=score, gen_id=gen["gen_id"], heading=f"### {title}")
        out += [body.rstrip(), ""]
    out += ["### Feedback against resampling, policy by policy", ""]
    if not rows:
        out += ["No trajectory is stored in both generations yet: nothing to compare.", ""]
    for split in sorted({r["split"] for r in rows}):
        mine = [r for r in rows if r["split"] == split]
        out += [f"#### {split} split", "", *feedback_lines(mine), ""]
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sweeps.revise_results", description=__doc__.splitlines()[0])
    ap.add_argument("store", help="a store holding a code run with a Critic and its critic=none control")
    ap.add_argument("--out", type=Path, help="write here (default: stdout)")
    args = ap.parse_args(argv)
    return emit(lambda: render(store_arg(args.store)), args.out, ap.prog)


if __name__ == "__main__":
    raise SystemExit(main())
