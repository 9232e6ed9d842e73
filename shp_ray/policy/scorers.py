"""Scorers: is a draft right, in the user's own sense? One score per name per round, stored in ``scores``.

A scorer is a function ``(task, draft) -> dict[str, float]`` (a name per score it gives; ``None`` for
"unknown", e.g. no gold answer) wrapped in a :class:`Scorer` that names it. The built-in kinds:

    hotpot    {"em", "f1"}: HotpotQA's exact match and token F1 of the draft's answer line (shp_ray.policy.answer)
    exact     {"exact"}: 1.0 when the answer line (the whole draft without one) equals a gold answer, normalised
    contains  {"contains"}: 1.0 when a normalised gold answer occurs in the normalised draft, word-aligned
    regex     {"regex"}: the pattern's named group ``answer`` (its last match) equals a gold answer, normalised
    python    the user's function, loaded by ``shp_ray.generation.score_config`` (``package.module:function``)

A scorer that raises (or returns something that is not a dict of finite numbers) does not stop anything:
:func:`score_rows` records the error on that round's rows (value NULL) and scores the next round.
This module is pure: the user's function is handed in already loaded.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from shp_ray.policy.answer import answer_line, answer_scores, normalize_answer

ANSWER_GROUP = "answer"  # the named group a regex scorer's pattern must have


@dataclass(frozen=True)
class Task:
    """What a scorer knows of a round's task: the scenario's id, question, gold answers and metadata."""

    scenario_id: str
    question: str = ""
    answers: tuple[str, ...] = ()
    meta: Mapping[str, object] = field(default_factory=dict)


def task_of(
    scenario_id: str, question: str, ground_truth: str | None, references: Sequence[str], meta: Mapping[str, object]
) -> Task:
    """A stored scenario as a scorer's task: its gold answers are the ground truth, then the other references."""
    gold = [ground_truth] if ground_truth is not None else []
    gold += [r for r in references or () if r not in gold]
    return Task(scenario_id, question or "", tuple(gold), meta)


ScoreFn = Callable[[Task, str], Mapping[str, object]]


class ScorerError(Exception):
    """A scorer's failure told as text, stored as it is (an error raised in a scorer's own process, a timeout)."""


def _as_is(text: str) -> str:
    return text


@dataclass(frozen=True)
class Scored:
    """A value with a label: a word saying what the value stands for (stored in the row's ``label``), e.g. the
    error class of a test run that scored 0. A scorer may give it in place of a plain number."""

    value: float | None
    label: str | None = None


@dataclass(frozen=True)
class Scorer:
    """A named score function. ``identity`` says what computes the values (stored with each row);
    ``names`` the scores it gives when known in advance (a python scorer's come from its results)."""

    kind: str
    fn: ScoreFn
    identity: str
    names: tuple[str, ...] = ()
    # what an error's text may show (a scorer built for a run redacts secrets: score_config.build)
    redact: Callable[[str], str] = _as_is


def _gold_match(answer: str | None, task: Task) -> float | None:
    if not task.answers:
        return None
    if answer is None:
        return 0.0
    pred = normalize_answer(answer)
    return float(any(pred == normalize_answer(g) for g in task.answers))


def hotpot(task: Task, draft: str) -> dict[str, float | None]:
    _, em, f1 = answer_scores(draft, task.answers[0] if task.answers else None)
    return {"em": em, "f1": f1}


def exact(task: Task, draft: str, name: str = "exact") -> dict[str, float | None]:
    line = answer_line(draft)
    return {name: _gold_match(draft if line is None else line, task)}


def contains(task: Task, draft: str, name: str = "contains") -> dict[str, float | None]:
    if not task.answers:
        return {name: None}
    text = f" {normalize_answer(draft)} "
    return {name: float(any(f" {g} " in text for g in map(normalize_answer, task.answers) if g))}


def regex_scorer(pattern: str, name: str = "regex") -> Scorer:
    """A scorer that extracts the answer with ``pattern``'s named group ``answer`` (its last match)."""
    compiled = re.compile(pattern)  # re.error names what is wrong with it
    if ANSWER_GROUP not in compiled.groupindex:
        raise ValueError(f"no named group (?P<{ANSWER_GROUP}>...) to extract the answer")

    def fn(task: Task, draft: str) -> dict[str, float | None]:
        found = [m.group(ANSWER_GROUP) for m in compiled.finditer(draft)]
        return {name: _gold_match(found[-1] if found else None, task)}

    return Scorer("regex", fn, f"regex:{name}:{pattern}", (name,))


def hotpot_scorer() -> Scorer:
    """HotpotQA's EM and F1 of the answer line."""
    return Scorer("hotpot", hotpot, "hotpot", ("em", "f1"))


def match_scorer(kind: str, name: str = "") -> Scorer:
    """The ``exact`` or ``contains`` scorer, its score stored as ``name`` (default: the kind)."""
    base = {"exact": exact, "contains": contains}[kind]
    label = name or kind
    return Scorer(kind, lambda task, draft: base(task, draft, label), f"{kind}:{label}", (label,))


def _checked(result: object) -> dict[str, tuple[float | None, str | None]]:
    """A scorer's result as {name: (float or None, label or None)}; ValueError naming what is wrong."""
    if not isinstance(result, Mapping) or not result:
        raise ValueError(f"a scorer must return a non-empty dict[str, float], got {type(result).__name__}")
    out: dict[str, tuple[float | None, str | None]] = {}
    for key, given in result.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"a score name must be a non-empty string, got {key!r}")
        value, label = (given.value, given.label) if isinstance(given, Scored) else (given, None)
        if label is not None and not isinstance(label, str):
            raise ValueError(f"score {key!r}: a label must be a string, got {label!r}")
        if value is None:
            out[key] = (None, label)
            continue
        if not isinstance(value, (int, float)) or not math.isfinite(float(value)):
            raise ValueError(f"score {key!r} must be a finite number, got {value!r}")
        out[key] = (float(value), label)
    return out


def _error(exc: BaseException) -> str:
    return (str(exc) if isinstance(exc, ScorerError) else f"{type(exc).__name__}: {exc}")[:500]


def score_rows(
    scorers: Sequence[Scorer], gen_id: str, items: Iterable[tuple[Task, int, str]]
) -> list[dict[str, object]]:
    """The ``scores`` rows of each (task, round, draft) under every scorer.

    A round whose scorer raised gets an error row for each name the scorer gave elsewhere in ``items``
    (its declared ``names``, else the names its other rounds returned; none at all: the scorer's kind),
    so each score's share of failed rounds counts it.
    """
    items = list(items)
    rows: list[dict[str, object]] = []
    for scorer in scorers:
        results: list[tuple[Task, int, dict[str, tuple[float | None, str | None]] | str]] = []
        for task, rnd, draft in items:
            try:
                results.append((task, rnd, _checked(scorer.fn(task, draft or ""))))
            except Exception as exc:  # the user's code: any error is that round's, the run goes on
                results.append((task, rnd, scorer.redact(_error(exc))))
        names = list(scorer.names)
        for _, _, res in results:
            if isinstance(res, dict):
                names += [n for n in res if n not in names]
        for task, rnd, res in results:
            base = {"gen_id": gen_id, "scenario_id": task.scenario_id, "round": rnd, "scorer": scorer.identity}
            if isinstance(res, str):
                rows += [
                    {**base, "score": n, "value": None, "error": res, "label": None} for n in names or [scorer.kind]
                ]
            else:
                rows += [{**base, "score": n, "value": v, "error": None, "label": lab} for n, (v, lab) in res.items()]
    return rows
