"""Per-round judge-free signals, computed ONE way for every executor.

The live :class:`shp_ray.policy.stopper.Stopper`, the reference executor
(:func:`shp_ray.policy.reference.replay`) and the DuckDB UDF all push the same round
inputs through :class:`SignalState`, so the floats they compare against
thresholds are bit-identical and their decisions cannot drift apart.

Round t's inputs: the draft, its embedding e_t, the embedding g_{t-1} of the
critique the Writer saw before drafting it (None at t = 1 or when unknown) and
the operational tokens charged for the round (writer_t + critic_{t-1}).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from shp_ray.policy.answer import answer_line
from shp_ray.policy.families.text import canonical_hash, content_words, token_edit_ratio, words
from shp_ray.policy.scoring import cosine_distance

Verifier = Callable[[str, Sequence[str]], bool]


def final_answer(draft: str, fmt: str = "plain") -> str | None:
    """The answer a draft states, or None if it states none in the required format.

    ``marker``: the text after the last "Final answer:" / "Answer:" line (the one reading the
    answer metrics use, :func:`shp_ray.policy.answer.answer_line`).
    ``plain``: that line when the draft has one (prompt v2 ends with it), else the whole draft
    (the v1 Writer replied with the answer only).
    """
    if fmt not in ("plain", "marker"):
        raise ValueError(f"unknown answer format {fmt!r}; choose 'plain' or 'marker'")
    line = answer_line(draft)
    found = line.strip() if line is not None else None
    if fmt == "marker":
        return found or None
    return found or draft.strip() or None


def context_vocab(contexts: Sequence[str]) -> frozenset[str]:
    """Every word of the contexts (built once per trajectory by the column-wise executor)."""
    return frozenset(w for c in contexts for w in words(c))


def share_in(answer: str, vocab: frozenset[str] | set[str]) -> float:
    """Share of the answer's content words found in ``vocab`` (NaN if it has none)."""
    return share_of(content_words(answer), vocab)


def share_of(cw: Sequence[str], vocab: frozenset[str] | set[str]) -> float:
    """:func:`share_in` of content words already extracted."""
    if not cw:
        return math.nan
    return sum(w in vocab for w in cw) / len(cw)


def grounded_share(answer: str, contexts: Sequence[str]) -> float:
    """Share of the answer's content words that occur in the contexts (NaN if it has none)."""
    return share_in(answer, context_vocab(contexts))


def qa_verifier(fmt: str = "plain") -> Verifier:
    """Deterministic QA verifier: a final answer in the format, every content word in the contexts."""

    def verify(draft: str, contexts: Sequence[str]) -> bool:
        answer = final_answer(draft, fmt)
        return answer is not None and grounded_share(answer, contexts) == 1.0

    # The column-wise executor (.columns) recognises this check by its format and runs it over the
    # trajectory's context vocabulary built once; any other verifier is called as it is.
    verify.answer_format = fmt  # type: ignore[attr-defined]
    return verify


VERIFIERS: dict[str, Verifier] = {"qa": qa_verifier("plain"), "qa_marker": qa_verifier("marker")}


def register_verifier(name: str, fn: Verifier) -> None:
    """Plug in a verifier for another task (a test runner, a parser...) under a policy param name."""
    if not callable(fn):
        raise ValueError(f"verifier {name!r} must be callable(draft, contexts) -> bool")
    VERIFIERS[name] = fn


def get_verifier(name: str) -> Verifier:
    try:
        return VERIFIERS[name]
    except KeyError:
        raise ValueError(f"unknown verifier {name!r}; known: {sorted(VERIFIERS)}") from None


@dataclass(frozen=True)
class RoundSignal:
    t: int
    distance: float  # d_t to the previous draft (NaN at t = 1)
    drift: float  # distance of draft t from draft 1 (0 at t = 1)
    consensus_distance: float  # between consensus vectors c_t and c_{t-1} (NaN at t = 1)
    length_change: float  # relative change of word count vs the previous draft (NaN at t = 1)
    edit: float  # word-level edit ratio to the previous draft (NaN at t = 1)
    canon: str  # hash of the canonical form (case/whitespace/punctuation folded)
    verified: bool
    grounded: float  # share of content words found in the contexts (NaN: no content words)
    spent: int  # cumulative operational tokens through round t
    embedding: np.ndarray
    critique: np.ndarray | None  # g_{t-1}, None when unknown
    # the answer the draft states, by its task's extractor (draft_answers); None: it states none, or unknown
    answer: str | None = None
    # the draft's token log-probability summaries (shp_ray.policy.logprobs.STATS -> nats; draft_logprobs); None:
    # the provider returned none
    confidence: Mapping[str, float] | None = None


def _usable(v: np.ndarray | None) -> bool:
    return v is not None and v.size > 0 and bool(np.any(v != 0)) and bool(np.all(np.isfinite(v)))


class SignalState:
    """Feeds rounds in order; returns each round's :class:`RoundSignal`."""

    def __init__(self, contexts: Sequence[str] = (), verifier: str = "qa") -> None:
        self.contexts = tuple(contexts)
        self.verify = get_verifier(verifier)
        self.history: list[RoundSignal] = []
        self._first: np.ndarray | None = None
        self._prev: np.ndarray | None = None
        self._prev_consensus: np.ndarray | None = None
        self._prev_draft = ""
        self._spent = 0

    def push(
        self,
        draft: str,
        embedding: np.ndarray,
        critique: np.ndarray | None = None,
        tokens: int = 0,
        verified: bool | None = None,
        answer: str | None = None,
        confidence: Mapping[str, float] | None = None,
    ) -> RoundSignal:
        """Round t's signal. ``verified``: the loop's own check of this draft (a code loop's visible tests all
        passing, :data:`.verifier.VISIBLE_TESTS_SCORE`), which replaces the named verifier's; None: ask the verifier.
        ``answer``: the answer the draft states (its task's extractor), for the answer-based families; ``confidence``:
        its token log-probability summaries (shp_ray.policy.logprobs.summarise), for the token-confidence family."""
        t = len(self.history) + 1
        e = np.asarray(embedding, dtype=np.float32).ravel()
        g = np.asarray(critique, dtype=np.float32).ravel() if critique is not None else None
        g = g if _usable(g) and g.shape == e.shape else None
        consensus = (e.astype(np.float64) + g) / 2.0 if g is not None else e.astype(np.float64)
        self._spent += int(tokens)
        if t == 1:
            dist = cons = length = edit = math.nan
            drift = 0.0
            self._first = e
        else:
            dist = cosine_distance(e, self._prev)
            drift = cosine_distance(e, self._first)
            cons = cosine_distance(consensus, self._prev_consensus)
            n_prev, n_cur = len(words(self._prev_draft)), len(words(draft))
            length = (n_cur - n_prev) / max(n_prev, 1)
            edit = token_edit_ratio(self._prev_draft, draft)
        plain = final_answer(draft) or ""  # what grounding reads (not the extracted ``answer``)
        sig = RoundSignal(
            t=t,
            distance=dist,
            drift=drift,
            consensus_distance=cons,
            length_change=length,
            edit=edit,
            canon=canonical_hash(draft),
            verified=bool(self.verify(draft, self.contexts)) if verified is None else bool(verified),
            grounded=grounded_share(plain, self.contexts),
            spent=self._spent,
            embedding=e,
            critique=g,
            answer=answer,
            confidence=confidence,
        )
        self._prev, self._prev_consensus, self._prev_draft = e, consensus, draft
        self.history.append(sig)
        return sig
