"""Is the draft right? HotpotQA's own answer metrics: normalised exact match and token F1.

The definitions are the official evaluation script's (``hotpot_evaluate_v1.py``): lower-case,
strip ASCII punctuation, drop the articles a/an/the, collapse whitespace; F1 over the normalised
tokens, 0 when either side is 'yes'/'no'/'noanswer' and they differ (a yes/no answer earns no
partial credit). They are read beside IS, so a user sees whether IS tracks being right.

Two readings of a draft's answer, both documented in docs/results.md, each number saying which it uses:

- **strict** (:func:`answer_scores`, the stored ``answer_em`` / ``answer_f1`` and ``replay.final_f1``): the
  LAST line that starts with ``Answer:`` or ``Final answer:`` (any case, leading whitespace allowed); a draft
  without one scores 0, however right its prose. The SQL view ``answers`` (analysis/sql/replay/answers/answers.sql).
- **lenient** (:func:`lenient_answer_scores`, the SQL view ``answers_lenient``): an ``Answer:`` anywhere in a
  line counts (``... so the answer: Paris``): the text after the first marker of the LAST line that has one;
  a draft with no marker at all is read by its last sentence (split on ``.``/``!``/``?`` followed by
  whitespace, and on line breaks), so a right answer in the wrong format is not scored 0. A small model often
  states its answer inline: the strict reading then measures the format, the lenient one the answer.

The SQL views compute the same numbers; tests hold them equal.
"""

from __future__ import annotations

import re
import string
from collections import Counter

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ANSWER_LINE = re.compile(r"\s*(?:final answer|answer):", re.IGNORECASE)
NO_PARTIAL_CREDIT = ("yes", "no", "noanswer")
# The lenient reading, in regexes RE2 (DuckDB) reads alike: the first marker of a line and the rest of that line;
# the sentence breaks (ASCII whitespace only, spelt out, so Python's Unicode \s and RE2's never differ).
INLINE_ANSWER = r"(?i:final answer|answer):([^\n]*)"
SENTENCE_BREAK = r"[.!?]+[ \t\r\n]+|\n"
VISIBLE = r"[^ \t\r\n]"
_INLINE = re.compile(INLINE_ANSWER)
_SENTENCE_BREAK = re.compile(SENTENCE_BREAK)
_VISIBLE = re.compile(VISIBLE)


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


def lenient_answer(draft: str) -> tuple[str, bool]:
    """(the answer, whether an ``Answer:`` marker gave it): after the first marker of the last line that has one
    anywhere in it; without any marker, the draft's last sentence ("" for a draft with no visible character)."""
    inline = _INLINE.findall(draft)
    if inline:
        return inline[-1], True
    sentences = [s for s in _SENTENCE_BREAK.split(draft) if _VISIBLE.search(s)]
    return (sentences[-1] if sentences else ""), False


def lenient_answer_scores(draft: str, gold: str | None) -> tuple[bool, float | None, float | None]:
    """(has_inline_answer, EM, F1) of one draft under the lenient reading; None without a gold answer."""
    answer, inline = lenient_answer(draft or "")
    if gold is None:
        return inline, None, None
    return inline, exact_match(answer, gold), f1_score(answer, gold)


QA_EXTRACTOR = "qa-lenient-v1"  # the stored name of the reading below (draft_answers.extractor)


def qa_answer(draft: str) -> str | None:
    """The answer a QA draft states, as the answer-based stopping rules compare it: the lenient reading,
    normalised (case, punctuation, articles); None when it states nothing (a draft with no word left)."""
    return normalize_answer(lenient_answer(draft or "")[0]) or None
