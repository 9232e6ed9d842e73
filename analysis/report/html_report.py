"""The HTML report of a job: ``report/index.html``, one static, self-contained page (no server, no network).

The sortable policy table, the Plotly charts (the library's own JavaScript inlined from the Python package) and a
trajectory browser: every round's draft with its word diff to the previous one, the critique, d_t, IS and every
score, and the round where each policy stops (the ``replay`` view). The trajectories travel as compact JSON, gzip'd and
base64'd, in ``<script>`` blocks of PAGE trajectories each, inflated and parsed only when one of them is chosen, so a
report of 10,000 trajectories opens in about the time of a small one (BENCHMARKS.md).

The page's own template, style and script are package data in ``analysis/report/html/``.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import math
import re
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from plotly.offline import get_plotlyjs

from analysis.report import html_figures
from analysis.report import power as report_power
from analysis.report.cells import short_labels, steady
from shp_ray.policy import groups as policy_groups
from storage.manifest import redact_text

INDEX = "index.html"  # the page's name in a report folder (a sweep summary links <job>/report/index.html)
PAGE = 100  # trajectories per JSON block: one block is parsed when one of its trajectories is chosen
_ASSETS = resources.files(__package__) / "html"
METRICS = ("faithfulness", "answer_relevancy", "context_precision", "context_recall")

# The policy table: (key, heading, decimals or None for text); IS_KEYS only where a judge scored the drafts, ANSWER_KEYS
# only where the tasks have reference answers; each score's columns (score_columns) after the saving, the primary first.
COLUMNS = (
    ("split", "split", None), ("gen", "generation", None), ("policy", "policy", None), ("family", "family", None),
    ("needs", "needs", None), ("n", "N", 0),
    ("verdict", "non-inferior (IS)", None), ("token_saving", "saving %", 1), ("saving_ci", "saving 95% CI", None),
    ("mean_is", "IS", 3), ("is_ci", "IS 95% CI", None), ("delta_is", "ΔIS", 4), ("mean_rounds", "rounds", 2),
    ("mean_operational_tokens", "op. tokens", 0), ("tokens_ci", "tokens 95% CI", None), ("mean_em", "EM", 3),
    ("mean_f1", "F1", 3), ("tost_power", "power", 2), ("n_needed", "N for power 0.8", 0),
)  # fmt: skip
IS_KEYS = {"verdict", "mean_is", "is_ci", "delta_is", "tost_power", "n_needed"}
ANSWER_KEYS = {"mean_em", "mean_f1"}


def score_columns(score: str) -> tuple[tuple[str, str, int | None], ...]:
    """One score's columns: its value at the stop, the paired difference against the baseline, its 95% interval
    and p-value (McNemar for a pass/fail score, the paired t-test otherwise)."""
    return ((f"{score}_at_stop", f"{score}_at_stop", 3), (f"{score}_diff", f"Δ{score} vs baseline", 3),
            (f"{score}_ci", f"Δ{score} 95% CI", None), (f"{score}_p", f"p {score}", 3))  # fmt: skip


def columns(data: Any) -> tuple[tuple[str, str, int | None], ...]:
    """The policy table's columns for a report_data.ReportData: each outcome it has, no column for one it lacks."""
    gone = (set() if data.has_is else IS_KEYS) | (set() if data.has_answers else ANSWER_KEYS)
    keep = [c for c in COLUMNS if c[0] not in gone]
    at = [k for k, _, _ in keep].index("token_saving") + 2  # after the saving and its interval
    scores = tuple(c for s in data.scores for c in score_columns(s))
    return (*keep[:at], *scores, *keep[at:])


def _num(x: object, nd: int = 4) -> float | None:
    """A JSON-safe number: None for None / NaN / inf, rounded to ``nd`` decimals (compact, stable)."""
    if x is None or isinstance(x, bool):
        return x  # type: ignore[return-value]
    v = float(x)  # type: ignore[arg-type]
    return None if math.isnan(v) or math.isinf(v) else round(steady(v), nd)


def _ci_text(ci: tuple[float, float], scale: float = 1.0, nd: int = 3) -> str:
    lo, hi = ci
    return "–" if math.isnan(lo) or math.isnan(hi) else f"[{scale * lo:.{nd}f}, {scale * hi:.{nd}f}]"


def _cell(value: object, nd: int | None) -> list[object]:
    """[sort value, text]: numbers sort as numbers, a missing value sorts last and prints "–"."""
    if nd is None:
        return [None if value is None else str(value), "–" if value is None else str(value)]
    v = _num(value, 6)
    return [v, "–" if v is None else f"{v:,.{nd}f}"]


def _place(policy: str) -> tuple[int, str]:
    return policy_groups.group(policy).order, policy


def table_rows(data: Any) -> list[list[list[object]]]:
    """The policy table: one row per (split, generation, policy), each cell [sort value, text]."""
    out = []
    cols = columns(data)
    verdict = [key for key, _, _ in cols].index("verdict") if data.has_is else -1
    for part in data.parts:
        short = short_labels(r["gen_id"] for r in part.summary)
        tests, by_key = part.tests, part.outcomes_by_key()
        # grouped by family (the family cell sorts by the family's place, not its name): policy_groups
        for r in sorted(part.summary, key=lambda r: (str(r["gen_id"]), *_place(str(r["policy"])))):
            ci = part.intervals.get((str(r["gen_id"]), str(r["policy"])), {})
            group = policy_groups.group(str(r["policy"]))
            is_test = tests.get((r["gen_id"], r["policy"], "is"), {})
            row = {**r, "split": part.name, "gen": short[str(r["gen_id"])],
                   "token_saving": None if r["token_saving"] is None else 100 * float(r["token_saving"]),
                   "tokens_ci": _ci_text(ci.get("tokens_ci", (math.nan, math.nan)), nd=0),
                   "saving_ci": _ci_text(ci.get("saving_ci", (math.nan, math.nan)), 100.0, 1),
                   "is_ci": _ci_text(ci.get("is_ci", (math.nan, math.nan))),
                   "family": group.family, "needs": group.needs,
                   "verdict": report_power.verdict(r["non_inferior"], is_test or {"n": r["n_is"], **r})}  # fmt: skip
            for score in data.scores:
                o = by_key.get((str(r["gen_id"]), str(r["policy"]), score), {})
                lo, hi = o.get("ci95_low"), o.get("ci95_high")
                row |= {f"{score}_at_stop": o.get("at_stop"), f"{score}_diff": o.get("diff"), f"{score}_p": o.get("p"),
                        f"{score}_ci": None if lo is None else _ci_text((float(lo), float(hi)))}  # fmt: skip
            cells = [[group.order, group.family] if key == "family" else _cell(row.get(key), nd) for key, _, nd in cols]
            if verdict >= 0:
                cells[verdict].append(report_power.verdict_kind(r))  # the verdict cell's colour
            out.append(cells)
    return out


def trajectories(
    parts: Sequence[Any], scores: Sequence[str] = ()
) -> tuple[list[list[object]], list[list[dict]], list[str], list[str]]:
    """(index, pages, policies, reasons): an index entry per trajectory [split, generation, scenario, question,
    depth] and the trajectories themselves, PAGE to a block; a stop is [policy index, round, reason index]; each
    round ends with its value of every score in ``scores`` (None where it has none)."""
    policies = sorted({str(s["policy"]) for p in parts for s in p.stops})
    reasons = sorted({str(s["reason"]) for p in parts for s in p.stops})
    pol_ix, why_ix = {p: i for i, p in enumerate(policies)}, {r: i for i, r in enumerate(reasons)}
    index: list[list[object]] = []
    flat: list[dict] = []
    for part in parts:
        short = short_labels(r["gen_id"] for r in part.rounds)
        stops: dict[tuple[str, str], list[list[int]]] = {}
        for s in part.stops:
            stops.setdefault((str(s["gen_id"]), str(s["scenario_id"])), []).append(
                [pol_ix[str(s["policy"])], int(s["stop_round"]), why_ix[str(s["reason"])]]
            )
        for key, rounds in _grouped(part.rounds):
            first = rounds[0]
            index.append([part.name, short[key[0]], key[1], (first["question"] or "")[:120], len(rounds)])
            flat.append({
                "q": first["question"], "gold": first["ground_truth"],
                "rounds": [[r["draft"], r["critique"], _num(r["d_t"]), _num(r["is_score"]),
                            *(_num(r[m]) for m in METRICS), _num(r["answer_em"]), _num(r["answer_f1"]),
                            r["approved"], [_num((r.get("scores") or {}).get(s)) for s in scores]]
                           for r in rounds],
                "stops": stops.get(key, []),
            })  # fmt: skip
    pages = [flat[i : i + PAGE] for i in range(0, len(flat), PAGE)]
    return index, pages, policies, reasons


def _grouped(rows: Iterable[dict]) -> Iterable[tuple[tuple[str, str], list[dict]]]:
    """The rounds of each (gen_id, scenario_id) in turn (the rows come ordered by both, then round)."""
    key, group = None, []
    for r in rows:
        k = (str(r["gen_id"]), str(r["scenario_id"]))
        if k != key and group:
            yield key, group  # type: ignore[misc]
            group = []
        key = k
        group.append(r)
    if group:
        yield key, group  # type: ignore[misc]


def _json(value: object) -> str:
    """JSON for a <script> block: every "<" escaped (\\u003c) so no text can close the block."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")


def _held_note(parts: Sequence[Any], index: list[list[object]]) -> str:
    """What the browser leaves out of a split too large for one page ("" when it holds every trajectory)."""
    held = {p.name: sum(1 for e in index if e[0] == p.name) for p in parts}
    cut = [f"split {p.name}: the first {held[p.name]:,} of {p.trajectories:,}" for p in parts
           if held[p.name] < p.trajectories]  # fmt: skip
    return "" if not cut else "This page holds " + "; ".join(cut) + " trajectories (by id); the tables hold all."


def _left_out(data: Any, figures: Sequence[dict]) -> list[str]:
    """One line per outcome, column or chart the page leaves out, saying why."""
    out = [f"{s}: its scorer failed on every draft ({error}), so no {s} column." for s, error in data.failed.items()]
    if not data.has_is:
        out.append("IS: no judge scored these drafts, so no IS column, verdict, IS chart or oracle_is row.")
    if not data.has_answers:
        out.append(
            "EM / F1: these tasks carry no reference answers, or no returned draft states an Answer: line to "
            "score, so no EM / F1 columns."
        )
    out += [f"split {f['split']}: no {data.primary} values, so no Pareto chart." for f in figures if not f["pareto"]]
    return out


def _packed(value: object) -> str:
    """A block of trajectories as gzip'd JSON in base64: successive drafts repeat each other, so a block shrinks
    ~10x, and the page's HTML stays small enough to open fast (the browser inflates one block on demand)."""
    raw = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    return base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode("ascii")


def render(data: Any, title: str) -> str:
    """The page's text for a report_data.ReportData."""
    setup, prov = data.setup, data.provenance
    index, pages, policies, reasons = trajectories(data.parts, data.scores)
    figures = [{"split": p.name, "pareto": html_figures.pareto(p, title, data.primary),
                "saved": html_figures.tokens_saved(p, title)} for p in data.parts]  # fmt: skip
    metrics = ["d_t", *(["IS", *METRICS] if data.has_is else []), *(["EM", "F1"] if data.has_answers else [])]
    splits = [{"name": p.name, "n": max(int(r["n"]) for r in p.summary)} for p in data.parts]
    payload = {
        "title": title,
        "synthetic": bool(prov["synthetic"]),
        "store": redact_text(setup.store),
        "judge": setup.judge or "none (IS unknown)",
        "delta": setup.delta,
        "splits": splits,
        "generations": [
            {"gen_id": g["gen_id"], "model": g["model"], "provider": g["provider_kind"], "max_rounds": g["max_rounds"]}
            for g in prov["generations"]
        ],  # fmt: skip
        "columns": [[key, head, nd is None] for key, head, nd in columns(data)],
        "rows": table_rows(data),
        "verdicts": {k: list(v) for k, v in report_power.VERDICT_KINDS.items()},
        "figures": figures,
        "left_out": _left_out(data, figures),
        "primary": data.primary,
        "policies": policies,
        "reasons": reasons,
        "metrics": metrics,  # which of a round's [d_t, IS, 4 metrics, EM, F1] the round cards show
        "scores": data.scores,
        "pass_fail": sorted(data.pass_fail),
        "page_size": PAGE,
        "index": index,
        "held_note": _held_note(data.parts, index),
    }
    blocks = "\n".join(
        f'<script type="application/gzip+base64" id="tp-{i}">{_packed(page)}</script>' for i, page in enumerate(pages)
    )
    values = {
        "<!--TITLE-->": html.escape(f"shp-ray report · {title}"),
        "/*STYLE*/": (_ASSETS / "report.css").read_text(encoding="utf-8"),
        "/*PLOTLY*/": get_plotlyjs(),
        "<!--DATA-->": f'<script type="application/json" id="report-data">{_json(payload)}</script>',
        "<!--PAGES-->": blocks,
        "/*APP*/": (_ASSETS / "report.js").read_text(encoding="utf-8"),
    }
    template = (_ASSETS / "report.html").read_text(encoding="utf-8")
    pieces = re.split("(" + "|".join(map(re.escape, values)) + ")", template)  # the template's markers only
    return "".join(values.get(piece, piece) for piece in pieces)


def write(data: Any, path: Path, title: str) -> Path:
    """Write the page to ``path`` (the caller's temporary report folder: moved in with the rest)."""
    path.write_text(render(data, title), encoding="utf-8")
    return path
