"""The report's section on the other stopping families, compared with SHP on the same trajectories."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import duckdb

from analysis import sql
from analysis.report import power as report_power
from analysis.report.cells import cell
from analysis.sql.rows import fetch_dicts
from shp_ray.policy.families.gain_model import GainModel
from shp_ray.policy.families.registry import FAMILIES

REFERENCE_POLICIES = ("shp", "oracle_is")


def collect(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
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


def section(
    fam: Mapping[str, Any], summary: Sequence[Mapping[str, Any]], tests: Mapping[tuple, Mapping], delta: float
) -> list[str]:
    """The report's section on the other stopping families (markdown lines).

    Long because it is the section's text in reading order, mostly prose and table rows; split, its
    sentences would be spread over helpers that each hold a paragraph.
    """
    if not fam:
        return []
    kinds: dict = fam["kinds"]
    crit: dict = fam["critiques"]
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
    for gen in sorted({r["gen_id"] for r in summary}):
        rows = {r["policy"]: r for r in summary if r["gen_id"] == gen}
        fam_rows = [r for p, r in rows.items() if kinds.get(p, {}).get("kind") in FAMILIES]
        if not fam_rows:
            continue
        refs = [rows[p] for p in REFERENCE_POLICIES if p in rows]
        reasons: dict[str, list[str]] = {}
        for r in fam["reasons"]:
            if r["gen_id"] == gen:
                reasons.setdefault(r["policy"], []).append(f"{r['reason']} {r['n']}")
        lines += [
            f"### Generation `{gen}`",
            "",
            f"| policy | family | rounds | op. tokens | saving | IS | ΔIS [95% CI] | TOST δ={delta:g} p "
            "| non-inferior | stopped by |",
            "|" + "---|" * 10,
        ]
        for r in refs + fam_rows:
            kind = kinds.get(r["policy"], {}).get("kind")
            is_ = tests.get((gen, r["policy"], "is"), {})
            ci = f"[{cell(is_.get('ci95_low'))}, {cell(is_.get('ci95_high'))}]"
            saving = None if r["token_saving"] is None else 100 * r["token_saving"]
            label = FAMILIES[kind].label if kind in FAMILIES else "SHP / reference"
            lines.append(
                f"| {r['policy']} | {label} | {cell(r['mean_rounds'], 2)} "
                f"| {cell(r['mean_operational_tokens'], 0)} | {cell(saving, 1)}% | {cell(r['mean_is'])} "
                f"| {cell(r['delta_is'], 4)} {ci} | {report_power.tost_p_cell(is_, cell(is_.get('tost_p')))} "
                f"| {report_power.verdict(r['non_inferior'], is_)} "
                f"| {', '.join(reasons.get(r['policy'], [])) or '–'} |"
            )
        lines.append("")
        oracle = rows.get("oracle_is")
        sel = {r["policy"]: r for r in fam["selection"] if r["gen_id"] == gen}
        best = [p for p in sel if json.loads(kinds[p]["params_json"]).get("select", "last") != "last"]
        if best:
            lines += [
                "#### Best-round selection (judge-free) next to oracle_is (judge-picked)",
                "",
                "| policy | mean stop round | mean returned round | returned an earlier draft | IS | IS − oracle_is |",
                "|---|---|---|---|---|---|",
            ]
            for p in best + (["oracle_is"] if oracle else []):
                r, s = rows[p], sel.get(p, {})
                gap = None if not oracle or r["mean_is"] is None else r["mean_is"] - oracle["mean_is"]
                lines.append(
                    f"| {p} | {cell(s.get('mean_stop', r['mean_rounds']), 2)} | {cell(s.get('mean_selected'), 2)} "
                    f"| {cell(100 * s['share_earlier'], 0) + '%' if s else '–'} "
                    f"| {cell(r['mean_is'])} | {cell(gap, 4)} |"
                )
            lines.append("")
        for p in (p for p in rows if kinds.get(p, {}).get("kind") == "gain_model"):
            r = rows[p]
            lines.append(f"#### `{p}`: {_gain_note(kinds[p]['params_json'])}")
            lines.append("")
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
        ver = [p for p in fam_rows if FAMILIES[kinds[p["policy"]]["kind"]].outcomes]
        if ver:
            lines += [
                "#### Verifier-first outcomes (only `verified` returned a draft that passed the verifier)",
                "",
                "| policy | verified | oscillation | budget | cap | returned draft verified |",
                "|---|---|---|---|---|---|",
            ]
            for r in ver:
                counts = {
                    x["reason"]: x["n"] for x in fam["reasons"] if x["gen_id"] == gen and x["policy"] == r["policy"]
                }
                share = sel.get(r["policy"], {}).get("share_verified")
                lines.append(
                    f"| {r['policy']} | "
                    + " | ".join(str(counts.get(o, 0)) for o in ("verified", "oscillation", "budget", "cap"))
                    + f" | {cell(None if share is None else 100 * share, 0)}% |"
                )
            lines.append("")
    return lines
