"""Is the draft right? HotpotQA's own answer metrics: normalised exact match and token F1.

The definitions are the official evaluation script's (``hotpot_evaluate_v1.py``): lower-case,
strip ASCII punctuation, drop the articles a/an/the, collapse whitespace; F1 over the normalised
tokens, 0 when either side is 'yes'/'no'/'noanswer' and they differ (a yes/no answer earns no
partial credit). They are read beside IS, so a user sees whether IS tracks being right.

A draft is scored on its final answer line: the LAST line that starts with ``Answer:`` or
``Final answer:`` (any case, leading whitespace allowed). A draft without one scores 0.
The SQL view ``answers`` (analysis/sql/answers.sql) computes the same numbers; tests hold them equal.
"""

from __future__ import annotations

import re
import string
from collections import Counter

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ANSWER_LINE = re.compile(r"\s*(?:final answer|answer):", re.IGNORECASE)
NO_PARTIAL_CREDIT = ("yes", "no", "noanswer")


def normalize_answer(text: str) -> str:
    """The official normalize_answer: lower, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> float:
    """1.0 when the normalised prediction equals the normalised gold answer, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction: str, gold: str) -> float:
    """Token F1 of the normalised answers, with the official yes/no/noanswer rule."""
    pred, ref = normalize_answer(prediction), normalize_answer(gold)
    if (pred in NO_PARTIAL_CREDIT or ref in NO_PARTIAL_CREDIT) and pred != ref:
        return 0.0
    pred_tokens, ref_tokens = pred.split(), ref.split()
    same = sum((Counter(pred_tokens) & Counter(ref_tokens)).values())
    if same == 0:
        return 0.0
    precision = 1.0 * same / len(pred_tokens)
    recall = 1.0 * same / len(ref_tokens)
    return (2 * precision * recall) / (precision + recall)  # the script's order of operations, bit for bit


def answer_line(draft: str) -> str | None:
    """The text after the last ``Answer:`` / ``Final answer:`` line prefix; None when no line has one.

    Lines are split on "\\n" only (as the SQL view splits them); a "\\r" left at the end is whitespace
    that normalisation drops.
    """
    found = None
    for line in draft.split("\n"):
        m = _ANSWER_LINE.match(line)
        if m:
            found = line[m.end() :]
    return found


def answer_scores(draft: str, gold: str | None) -> tuple[bool, float | None, float | None]:
    """(has_answer_line, EM, F1) of one draft: 0 without an answer line; None without a gold answer."""
    answer = answer_line(draft or "")
    if gold is None:
        return answer is not None, None, None
    if answer is None:
        return False, 0.0, 0.0
    return True, exact_match(answer, gold), f1_score(answer, gold)
