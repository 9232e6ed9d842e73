"""A stored generation's trajectories as the exporter writes them: each one's rounds (or the rounds up to a policy's
stop, as the replay computes it), its task and its scores: the ``scores`` table's and, for a generated (not
imported) generation, what the replay reads of each round: its answer's EM and F1 against the gold answer and the
judge's IS (``answer_em``, ``answer_f1``, ``is_score``, as the ``rounds`` view names them)."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

import analysis
from analysis.errors import AnalysisError
from shp_ray.policy.table import policy_by_name
from storage.parts import Store, StoreError
from storage.resume import full_gen_id

ROUND_COLUMNS = ["gen_id", "scenario_id", "round", "draft", "feedback", "writer_prompt_tokens",
                 "writer_completion_tokens", "critic_prompt_tokens", "critic_completion_tokens"]  # fmt: skip
MEASURES = ("answer_em", "answer_f1", "is_score")  # the rounds view's columns exported as scores of a generated run
Scores = dict[str, dict[int, dict[str, float]]]  # scenario -> round -> score -> value


@dataclass(frozen=True)
class Stop:
    policy: str
    round: int
    reason: str
    operational_tokens: int


@dataclass(frozen=True)
class Trajectory:
    scenario_id: str
    task_id: str  # the sample's id
    epoch: int
    question: str
    answers: tuple[str, ...]
    rounds: tuple[dict, ...]  # the rounds' columns (ROUND_COLUMNS), in order
    scores: dict[int, dict[str, float]] = field(default_factory=dict)  # round -> score -> value (failed: absent)
    stop: Stop | None = None


def generation_of(store: Store, given: str | None) -> dict:
    """The generations row exported: the one given (an id or a prefix), or the store's only one."""
    rows = {r["gen_id"]: r for r in store.read("generations").to_pylist()}
    if given is None:
        if len(rows) != 1:
            shown = ", ".join(sorted(g[:12] for g in rows)) or "none"
            raise StoreError(f"{store.uri} holds {len(rows)} generations ({shown}): name one with --gen")
        return next(iter(rows.values()))
    gen_id = full_gen_id(store, given)
    if gen_id not in rows:
        raise StoreError(f"generation {gen_id[:12]} of {store.uri} has no generations row (an unfinished run)")
    return rows[gen_id]


@dataclass(frozen=True)
class Replayed:
    stops: dict[str, Stop] | None  # each trajectory's stop under the policy asked (None: none asked)
    measures: Scores  # the rounds' answer EM / F1 and IS (empty: not asked)
    judge: str | None  # the judge whose IS the measures hold (None: no IS)


def replayed(store: Store, gen_id: str, policy: str | None, judge: str | None, measures: bool) -> Replayed:
    """What the replay every other reader of the store sees says of the generation: each trajectory's stop under
    ``policy``, and (``measures``) each round's answer EM / F1 and IS under ``judge`` (the only one if None)."""
    try:
        resolved = [policy_by_name(policy)] if policy else []
    except ValueError as exc:
        raise StoreError(f"--policy: {exc}") from None
    try:
        con = analysis.connect(store, judge=judge, policies=resolved)
    except AnalysisError as exc:
        raise StoreError(exc.in_terms_of({"judge": "--judge"})) from None
    stops = None
    got: Scores = defaultdict(lambda: defaultdict(dict))
    try:
        if policy:
            stops = {r["scenario_id"]: Stop(policy, r["stop_round"], r["reason"], r["operational_tokens"])
                     for r in con.table("replay").to_arrow_table().to_pylist() if r["gen_id"] == gen_id}  # fmt: skip
        if measures:
            table = con.table("rounds").to_arrow_table().select(["gen_id", "scenario_id", "round", *MEASURES])
            for r in table.to_pylist():
                values = {m: r[m] for m in MEASURES if r[m] is not None and math.isfinite(r[m])}
                if r["gen_id"] == gen_id and values:
                    got[r["scenario_id"]][r["round"]] |= values
        named = analysis.setup_of(con).judge if measures else None
    finally:
        con.close()
    has_is = any("is_score" in v for rounds in got.values() for v in rounds.values())
    return Replayed(stops, {s: dict(v) for s, v in got.items()}, named if has_is else None)


def trajectories(
    store: Store, gen_id: str, stops: dict[str, Stop] | None = None, measures: Scores | None = None
) -> list[Trajectory]:
    """Every trajectory of the generation, in scenario order; with ``stops``, each cut at its stop; ``measures``: more
    scores per round (the ``scores`` table's win where both name one)."""
    by_scenario: dict[str, list[dict]] = defaultdict(list)
    for r in store.read("rounds", columns=ROUND_COLUMNS).to_pylist():
        if r["gen_id"] == gen_id:
            by_scenario[r["scenario_id"]].append(r)
    if not by_scenario:
        raise StoreError(f"no rounds of generation {gen_id[:12]} in {store.uri}")
    scores: Scores = defaultdict(lambda: defaultdict(dict))
    for sid, by_round in (measures or {}).items():
        for t, values in by_round.items():
            scores[sid][t] |= values
    for r in store.read("scores", columns=["gen_id", "scenario_id", "round", "score", "value"]).to_pylist():
        if r["gen_id"] == gen_id and r["value"] is not None:
            scores[r["scenario_id"]][r["round"]][r["score"]] = r["value"]
    tasks = {r["scenario_id"]: r for r in store.read("scenarios").to_pylist()}
    out = []
    for sid in sorted(by_scenario):
        rounds = sorted(by_scenario[sid], key=lambda r: r["round"])
        stop = stops.get(sid) if stops is not None else None
        if stops is not None and stop is None:
            continue  # not replayed (a trajectory the replay leaves out): not exported under a policy
        if stop is not None:
            rounds = [r for r in rounds if r["round"] <= stop.round]
        task = tasks.get(sid, {})
        answers = [task.get("ground_truth")] if task.get("ground_truth") is not None else []
        answers += [a for a in task.get("references") or [] if a not in answers]
        out.append(Trajectory(
            sid, task.get("task_id") or sid, task.get("epoch") or 1, task.get("question") or "", tuple(answers),
            tuple(rounds), {t: dict(v) for t, v in scores[sid].items() if t <= rounds[-1]["round"]}, stop,
        ))  # fmt: skip
    return out
