"""Scores and answers computed again for a stored generation, with no model call: its drafts and tasks are in the store.

The scores of a generation are measurements of its stored drafts, so they never enter its id: a scorer added
later (or fixed) scores the same drafts here. Keys already stored by the same scorer are not written again. The same
holds for each draft's extracted answer (``draft_answers``, :func:`rescore_answers`): a store written before answers
were stored gets them here, and the answer-based stopping families then replay on it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from shp_ray.generation.answer_config import AnswerSpec, answer_rows
from shp_ray.generation.answer_config import build as build_extractor
from shp_ray.generation.score_config import ScoreSpec, build
from shp_ray.policy.scorers import Task, score_rows
from storage.answers_schema import DRAFT_ANSWERS
from storage.parts import Store, StoreError
from storage.resume import full_gen_id
from storage.schemas import SCORES


def tasks_of(store: Store) -> dict[str, Task]:
    """Every stored scenario as a scorer's task: gold answers = ground truth first, then the other references."""
    out = {}
    for r in store.read(
        "scenarios", columns=["scenario_id", "question", "ground_truth", "references", "meta_json"]
    ).to_pylist():
        gold = [r["ground_truth"]] if r["ground_truth"] is not None else []
        gold += [x for x in r["references"] or [] if x not in gold]
        meta = json.loads(r["meta_json"]) if r["meta_json"] else {}
        out[r["scenario_id"]] = Task(r["scenario_id"], r["question"] or "", tuple(gold), meta)
    return out


def _rounds(store: Store, gen_id: str) -> list[dict[str, Any]]:
    """The stored rounds of ``gen_id`` (its id, a whole one), their drafts; StoreError when it has none."""
    parts = store.parts("rounds", gen_id)
    rounds = [
        r
        for part in parts
        for r in store.read_part("rounds", part, columns=["gen_id", "scenario_id", "round", "draft"]).to_pylist()
        if r["gen_id"] == gen_id
    ]
    if not rounds:
        raise StoreError(f"no rounds of generation {gen_id!r} in {store.uri}")
    return rounds


def rescore(store: Store, gen_id: str, specs: Sequence[ScoreSpec]) -> list[dict[str, Any]]:
    """Score every stored round of ``gen_id`` (or the one generation whose id starts so) with ``specs`` and store
    the new rows; returns them."""
    scorers = [build(s) for s in specs]
    gen_id = full_gen_id(store, gen_id)  # a prefix (the 8 digits a report prints) names one generation
    rounds = _rounds(store, gen_id)
    stored = {
        (r["scenario_id"], r["round"], r["scorer"])
        for part in store.parts("scores", gen_id)
        for r in store.read_part("scores", part, columns=["gen_id", "scenario_id", "round", "scorer"]).to_pylist()
        if r["gen_id"] == gen_id
    }
    tasks = tasks_of(store)
    rows = []
    for scorer in scorers:
        todo = [r for r in rounds if (r["scenario_id"], r["round"], scorer.identity) not in stored]
        items = [(tasks.get(r["scenario_id"]) or Task(r["scenario_id"]), r["round"], r["draft"]) for r in todo]
        rows += score_rows([scorer], gen_id, items)
    if rows:
        store.write("scores", pa.Table.from_pylist(rows, schema=SCORES), SCORES)
    return rows


def rescore_answers(store: Store, gen_id: str, spec: AnswerSpec | None = None) -> list[dict[str, Any]]:
    """Extract the answer of every stored round of ``gen_id`` (or the one generation whose id starts so) with the
    extractor ``spec`` builds (default: the task's own) and store the rows not stored yet by that extractor;
    returns them."""
    extractor = build_extractor(spec or AnswerSpec())
    gen_id = full_gen_id(store, gen_id)
    rounds = _rounds(store, gen_id)
    columns = ["gen_id", "scenario_id", "round", "extractor"]
    stored = {
        (r["scenario_id"], r["round"], r["extractor"])
        for part in store.parts("draft_answers", gen_id)
        for r in store.read_part("draft_answers", part, columns=columns).to_pylist()
        if r["gen_id"] == gen_id
    }
    tasks = tasks_of(store)
    todo = [r for r in rounds if not any((r["scenario_id"], r["round"], n) in stored for n in extractor.names)]
    items = [(tasks.get(r["scenario_id"]) or Task(r["scenario_id"]), r["round"], r["draft"]) for r in todo]
    rows = answer_rows(extractor, gen_id, items)
    if rows:
        store.write("draft_answers", pa.Table.from_pylist(rows, schema=DRAFT_ANSWERS), DRAFT_ANSWERS)
    return rows
