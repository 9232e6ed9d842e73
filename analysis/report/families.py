"""The report's section on the other stopping families, compared with SHP on the same trajectories."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from analysis import sql
from analysis.report import power as report_power
from analysis.report.cells import cell
from analysis.sql.rows import fetch_dicts
from shp_ray.policy import groups as policy_groups
from shp_ray.policy.families.gain_model import GainModel
from shp_ray.policy.families.registry import FAMILIES

REFERENCE_POLICIES = ("shp", "oracle_is")


def collect(con: duckdb.DuckDBPyConnection) -> dict[str, object]:
    """What the section needs, read while the connection is open (empty when no family was replayed)."""
    kinds = {r["policy"]: r for r in fetch_dicts(con, sql.query("report_policy_kinds"))}
    if not any(r["kind"] in FAMILIES for r in kinds.values()):
        return {}
    reasons = fetch_dicts(con, sql.query("report_family_reasons"))
    selection = fetch_dicts(con, sql.query("report_family_selection"))
    critiques = fetch_dicts(con, sql.query("report_critique_coverage"))
    return {"kinds": kinds, "reasons": reasons, "selection": selection, "critiques": critiques[0]}


def _gain_note(params_json: str) -> str:
    model = json.loads(params_json).get("model")
    if not model:
        return "**NOT FITTED** (no dev-split trajectories): it ran to the cap; its rows measure nothing"
    m = GainModel.from_json(model)
    return (
        f"ridge artefact {m.version} `{m.digest}`, fitted on {m.meta.get('n_trajectories')} "
        f"{m.meta.get('split')}-split trajectories ({m.n_train} rounds, features: {', '.join(m.features)})"
    )


@dataclass(frozen=True)
class _Generation:
    """One generation's rows, and what the section read for every generation (:func:`collect`)."""

    gen_id: str
    rows: dict[str, Mapping[str, Any]]  # policy -> its policy_summary row
    fam: Mapping[str, Any]
    tests: Mapping[tuple, Mapping]
    delta: float

    @property
    def kinds(self) -> dict[str, Any]:
        return self.fam["kinds"]

    def kind(self, policy: object) -> str | None:
        return self.kinds.get(str(policy), {}).get("kind")

    @property
    def family_rows(self) -> list[Mapping[str, Any]]:
        return [self.rows[p] for p in policy_groups.ordered(self.rows) if self.kind(p) in FAMILIES]

    @property
    def selection(self) -> dict[str, Mapping[str, Any]]:
        return {r["policy"]: r for r in self.fam["selection"] if r["gen_id"] == self.gen_id}

    def reasons(self, policy: object) -> list[Mapping[str, Any]]:
        return [r for r in self.fam["reasons"] if r["gen_id"] == self.gen_id and r["policy"] == policy]


def section(
    fam: Mapping[str, Any], summary: Sequence[Mapping[str, Any]], tests: Mapping[tuple, Mapping], delta: float
) -> list[str]:
    """The report's section on the other stopping families (markdown lines): per generation, the policy table,
    best-round selection beside oracle_is, each gain model's note, and the verifier-first outcomes."""
    if not fam:
        return []
    crit = fam["critiques"]
    lines = [
        "## Beyond SHP: other stopping systems on the same trajectories",
        "",
        "Every family replays the SAME stored drafts as SHP (no new generation) and never consults the judge "
        "(operational tokens: writers up to the stop, critics before it). ΔIS and TOST are paired against the "
        "same baseline fixed_k{depth}. Critique embeddings (consensus, gain_model) known for "
        f"{crit['known']} of {crit['n']} critiques"
        + (" — consensus fell back to the draft alone where unknown." if crit["known"] < crit["n"] else "."),
        "",
    ]
    for gen_id in sorted({r["gen_id"] for r in summary}):
        g = _Generation(gen_id, {r["policy"]: r for r in summary if r["gen_id"] == gen_id}, fam, tests, delta)
        if g.family_rows:
            lines += [*_policy_table(g), *_best_round(g), *_gain_notes(g), *_verifier_outcomes(g)]
    return lines


def _policy_table(g: _Generation) -> list[str]:
    lines = [
        f"### Generation `{g.gen_id}`",
        "",
        f"| policy | family | needs | rounds | op. tokens | saving | IS | ΔIS [95% CI] | TOST δ={g.delta:g} p "
        "| non-inferior | stopped by |",
        "|" + "---|" * 11,
    ]
    refs = [g.rows[p] for p in REFERENCE_POLICIES if p in g.rows]
    for r in refs + g.family_rows:
        kind = g.kind(r["policy"])
        is_ = g.tests.get((g.gen_id, r["policy"], "is"), {})
        ci = f"[{cell(is_.get('ci95_low'))}, {cell(is_.get('ci95_high'))}]"
        saving = None if r["token_saving"] is None else 100 * r["token_saving"]
        label = FAMILIES[kind].label if kind in FAMILIES else "SHP / reference"
        needs = policy_groups.group(str(r["policy"])).needs
        stopped = ", ".join(f"{x['reason']} {x['n']}" for x in g.reasons(r["policy"])) or "–"
        lines.append(
            f"| {r['policy']} | {label} | {needs} | {cell(r['mean_rounds'], 2)} "
            f"| {cell(r['mean_operational_tokens'], 0)} | {cell(saving, 1)}% | {cell(r['mean_is'])} "
            f"| {cell(r['delta_is'], 4)} {ci} | {report_power.tost_p_cell(is_, cell(is_.get('tost_p')))} "
            f"| {report_power.verdict(r['non_inferior'], is_)} | {stopped} |"
        )
    return [*lines, ""]


def _best_round(g: _Generation) -> list[str]:
    """Best-round selection (judge-free) next to oracle_is (judge-picked)."""
    sel, oracle = g.selection, g.rows.get("oracle_is")
    best = [p for p in sel if json.loads(g.kinds[p]["params_json"]).get("select", "last") != "last"]
    if not best:
        return []
    lines = [
        "#### Best-round selection (judge-free) next to oracle_is (judge-picked)",
        "",
        "| policy | mean stop round | mean returned round | returned an earlier draft | IS | IS − oracle_is |",
        "|---|---|---|---|---|---|",
    ]
    for p in best + (["oracle_is"] if oracle else []):
        r, s = g.rows[p], sel.get(p, {})
        gap = None if not oracle or r["mean_is"] is None else r["mean_is"] - oracle["mean_is"]
        lines.append(
            f"| {p} | {cell(s.get('mean_stop', r['mean_rounds']), 2)} | {cell(s.get('mean_selected'), 2)} "
            f"| {cell(100 * s['share_earlier'], 0) + '%' if s else '–'} "
            f"| {cell(r['mean_is'])} | {cell(gap, 4)} |"
        )
    return [*lines, ""]


def _gain_notes(g: _Generation) -> list[str]:
    """Each gain model's artefact, and the share of the oracle's gap it closed."""
    oracle, lines = g.rows.get("oracle_is"), []
    for p in (p for p in g.rows if g.kind(p) == "gain_model"):
        r = g.rows[p]
        lines += [f"#### `{p}`: {_gain_note(g.kinds[p]['params_json'])}", ""]
        if oracle and oracle["delta_is"] and r["delta_is"] is not None:
            closed = r["delta_is"] / oracle["delta_is"]
            lines.append(
                f"Share of the oracle gap closed on this split: ΔIS {r['delta_is']:+.4f} of oracle_is's "
                f"{oracle['delta_is']:+.4f} over fixed_k{{max}} = **{100 * closed:.1f}%**, "
                f"at {cell(None if r['token_saving'] is None else 100 * r['token_saving'], 1)}% fewer tokens."
            )
        else:
            lines.append("Share of the oracle gap closed: – (no gap: oracle_is equals fixed_k{max} here).")
        lines.append("")
    return lines


def _verifier_outcomes(g: _Generation) -> list[str]:
    ver = [r for r in g.family_rows if FAMILIES[str(g.kind(r["policy"]))].outcomes]
    if not ver:
        return []
    lines = [
        "#### Verifier-first outcomes (only `verified` returned a draft that passed the verifier)",
        "",
        "| policy | verified | oscillation | budget | cap | returned draft verified |",
        "|---|---|---|---|---|---|",
    ]
    for r in ver:
        counts = {x["reason"]: x["n"] for x in g.reasons(r["policy"])}
        share = g.selection.get(r["policy"], {}).get("share_verified")
        lines.append(
            f"| {r['policy']} | "
            + " | ".join(str(counts.get(o, 0)) for o in ("verified", "oscillation", "budget", "cap"))
            + f" | {cell(None if share is None else 100 * share, 0)}% |"
        )
    return [*lines, ""]
