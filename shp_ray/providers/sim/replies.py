"""Deterministic replies of the SIMULATED server ``shp-serve`` (a test double of the protocol).

The role protocol the generation code writes its prompts to:

- the Writer's system message contains ``You are the Writer``, the Critic's ``You are the
  Critic``, the judge's ``You are the judge``; anything else gets a generic reply;
- Writer / Critic user messages carry a line ``Round: <t>`` (t = 1, 2, ...); a line
  ``Question: <q>`` names the question (else the whole user message stands for it).

Writer drafts converge over rounds (several sentences replaced early, only a revision number
late), so embedding distances between consecutive drafts shrink. The Critic approves from a
hash-chosen round for a configurable share of questions. The judge returns the four RAGAS-style
metrics as JSON. Every reply is a pure function of the request and the seed (a Writer request at a
temperature above 0 is a sample: its own seed picks its sentences).

Token counts are REAL counts of the regex tokenizer of :mod:`shp_ray.providers.tokens` (each run
of word characters and each other non-space character is one token, plus 3 tokens of overhead per
message for the prompt).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass

_ROUND = re.compile(r"^\s*Round:\s*(\d+)\s*$", re.MULTILINE)
_QUESTION = re.compile(r"^\s*Question:\s*(.+?)\s*$", re.MULTILINE)
METRICS = ("faithfulness", "answer_relevancy", "context_precision", "context_recall")


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_STOP = frozenset(
    _words(
        "a an the of in on at to for and or is are was were be by with from what which who whom whose "
        "when where why how did does do that this these those it its as than then into about"
    )
)
_VOCAB = _words(
    "archive record source witness treaty river harbour council census charter ledger expedition "
    "dynasty railway province manuscript survey decree festival garrison monastery parish colony "
    "observatory estate reform tribunal assembly frontier canal workshop mission academy"
)
_TEMPLATES = (
    "The {a} is tied to the {b} according to the cited passage.",
    "Most accounts place the {a} before the {b}, which settles the order of events.",
    "A second source links the {a} with the {b} and gives the same answer.",
    "Taken together, the {a} and the {b} point to a single conclusion.",
    "The passage on the {a} mentions the {b} only in passing.",
    "Records of the {a} disagree about the {b}, so the claim stays hedged.",
    "The strongest evidence concerns the {a}; the {b} adds detail.",
    "In short, the {a} explains the question better than the {b} does.",
    "The context describes the {a} and the {b} as closely related.",
    "Nothing in the contexts contradicts the link between the {a} and the {b}.",
)


def _h(*parts: object) -> int:
    blob = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big")


def _unit(*parts: object) -> float:
    return _h(*parts) / 2**64


@dataclass(frozen=True)
class ReplyOptions:
    seed: int = 0
    approve_rate: float = 0.3  # share of questions whose Critic approves from some round on
    approve_from: tuple[int, int] = (2, 5)  # the approving round is drawn in this range
    converge_rounds: tuple[int, int] = (3, 5)  # drafts stop changing sentences after this round


def _role(messages: list[tuple[str, str]]) -> str:
    system = " ".join(c for r, c in messages if r == "system")
    for role in ("Writer", "Critic", "judge"):
        if f"You are the {role}" in system:
            return role.lower()
    return "generic"


def _user_text(messages: list[tuple[str, str]]) -> str:
    return "\n".join(c for r, c in messages if r == "user")


def _question(user: str) -> str:
    m = _QUESTION.search(user)
    return m.group(1) if m else _ROUND.sub("", user).strip()


def _round(user: str) -> int:
    m = _ROUND.search(user)
    return max(1, int(m.group(1))) if m else 1


def _keywords(question: str) -> list[str]:
    words = [w.lower() for w in re.findall(r"[A-Za-z][A-Za-z'-]+", question)]
    kept = [w for w in words if w not in _STOP and len(w) > 2]
    return kept or ["question"]


def _sentence(opts: ReplyOptions, question: str, *salt: object) -> str:
    words = _keywords(question)
    h = _h(opts.seed, question, *salt)
    a = words[h % len(words)]
    b = _VOCAB[(h >> 16) % len(_VOCAB)]
    return _TEMPLATES[(h >> 32) % len(_TEMPLATES)].format(a=a, b=b)


def writer_draft(opts: ReplyOptions, question: str, t: int, n_sentences: int = 4, sample: int | None = None) -> str:
    """Round ``t``'s draft: early rounds replace several sentences, late rounds only a number. A sampled request
    (``sample``: its seed) gets sentences of its own: another seed, another draft; the same seed, the same one."""
    lo, hi = opts.converge_rounds
    settle = lo + _h(opts.seed, "settle", question) % (hi - lo + 1)
    n_alt = max(0, min(n_sentences - 1, settle - t))
    drawn = () if sample is None else ("sample", sample)
    sentences = [
        _sentence(opts, question, "alt", t, i, *drawn) if i < n_alt else _sentence(opts, question, "base", i, *drawn)
        for i in range(n_sentences)
    ]
    return " ".join(sentences) + f" (Revision {t}.)"


def approving_round(opts: ReplyOptions, question: str) -> int | None:
    """The round from which the Critic approves this question, or None if it never does."""
    if _unit(opts.seed, "approve?", question) >= opts.approve_rate:
        return None
    lo, hi = opts.approve_from
    return lo + _h(opts.seed, "approve@", question) % (hi - lo + 1)


def critic_feedback(opts: ReplyOptions, question: str, t: int) -> str:
    r = approving_round(opts, question)
    if r is not None and t >= r:
        return "APPROVED. The draft answers the question and stays within the contexts."
    words = _keywords(question)
    w = words[_h(opts.seed, "critic", question, t) % len(words)]
    v = _VOCAB[_h(opts.seed, "critic-v", question, t) % len(_VOCAB)]
    return f"Say more about the {w} and check the claim about the {v}; tighten the second sentence."


def judge_scores(opts: ReplyOptions, user: str) -> dict[str, float]:
    return {m: round(0.35 + 0.65 * _unit(opts.seed, "judge", m, user), 3) for m in METRICS}


def reply_text(opts: ReplyOptions, messages: list[tuple[str, str]], sample: int | None = None) -> str:
    """The full (untruncated) reply of the simulated model to ``messages`` (``sample``: a sampled Writer
    request's seed)."""
    role = _role(messages)
    user = _user_text(messages)
    if role == "writer":
        return writer_draft(opts, _question(user), _round(user), sample=sample)
    if role == "critic":
        return critic_feedback(opts, _question(user), _round(user))
    if role == "judge":
        return json.dumps(judge_scores(opts, user))
    first = " ".join(user.split()[:12])
    return f"Simulated reply {_h(opts.seed, 'generic', user) % 10_000:04d} to: {first}"


def token_logprobs(opts: ReplyOptions, messages: list[tuple[str, str]], tokens: list[str]) -> list[float]:
    """A plausible log-probability for each token of the reply (asked with ``logprobs: true``): exponentially
    distributed surprisal, its mean halving as the rounds go on (0.5 nats at round 1, as a draft settles its model
    grows surer), a pure function of the request and the seed."""
    user = _user_text(messages)
    scale = 0.5 / _round(user)
    return [scale * math.log1p(-_unit(opts.seed, "logprob", user, i, tok)) for i, tok in enumerate(tokens)]
