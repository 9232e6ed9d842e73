"""Judges: the four RAGAS-style metrics of one draft, each in [0, 1].

- :class:`LexicalJudge`: free, deterministic, reference-based token overlap
  against the contexts, question and ground truth. Named as what it is in every
  output: it is not an LLM.
- LLM judge: :func:`parse_judge_reply` + :func:`llm_judge` ask a model for ONE
  JSON object; an unparsable reply is retried (with a different request, so no
  cache hit repeats it), then recorded as NaN with the error -- never as 0,
  which would fake a loss of quality.

:func:`judge_key` is the cache key: judge name, prompt version, metric set,
question, contexts, ground truth and draft -- never the draft alone, so the
same hedge under two questions cannot collide.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from shp_ray.generation.datasets import Scenario
from shp_ray.generation.prompts import JUDGE_PROMPT_VERSION, judge_messages
from shp_ray.policy.scoring import METRICS
from shp_ray.providers.base import BATCH, LIVE, ChatRequest, Completion

LEXICAL_NAME = "lexical-v1 (deterministic reference-based token overlap, not an LLM)"
LEXICAL_VERSION = "lexical-v1"
NO_CONTEXTS_ERROR = "scenario has no contexts: faithfulness, context_precision, context_recall undefined (NaN)"

_TOKEN = re.compile(r"[a-z0-9]+")
_STOP_WORDS = """
a an the of in on at to for from by with and or but is are was were be been being it its this that these
those as which who whom what when where why how do does did not no yes there their they he she his her
i you we our your my me us them than then so such can could would should will may might has have had
"""
_STOP = frozenset(_STOP_WORDS.split())


@dataclass(frozen=True)
class JudgeResult:
    metrics: dict[str, float]
    judge: str
    prompt_version: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str = ""
    cached: bool = False
    attempts: int = 1
    extra: dict[str, object] = field(default_factory=dict, compare=False)
    # How its calls were paid (CALL_MODES): "batch" only when every attempt was a batch call, so a judgment
    # that mixed modes is priced at the higher, live price. The lexical judge makes no call (0 tokens, $0).
    mode: str = LIVE

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_record(self) -> dict[str, object]:
        """The judge cache's record (its on-disk format: existing caches must still read). NaN is stored as null;
        ``mode`` only for a batch judgment (a record without one is live, as every record before modes was)."""
        record: dict[str, object] = {
            "metrics": {m: (None if math.isnan(v) else v) for m, v in self.metrics.items()},
            "judge": self.judge,
            "prompt_version": self.prompt_version,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "error": self.error,
        }
        if self.mode != LIVE:
            record["mode"] = self.mode
        return record

    @classmethod
    def from_record(cls, d: dict, cached: bool = True) -> JudgeResult:
        metrics = {m: (math.nan if d["metrics"].get(m) is None else float(d["metrics"][m])) for m in METRICS}
        return cls(
            metrics, d["judge"], d["prompt_version"], d["prompt_tokens"], d["completion_tokens"], d["error"], cached,
            mode=d.get("mode", LIVE),  # records written before modes: every call was live
        )  # fmt: skip


def judge_key(
    judge: str,
    prompt_version: str,
    question: str,
    contexts: Sequence[str],
    ground_truth: str,
    draft: str,
    metrics: Sequence[str] = METRICS,
) -> str:
    blob = json.dumps(
        [judge, prompt_version, list(metrics), question, list(contexts), ground_truth, draft],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def draft_hash(draft: str) -> str:
    return hashlib.sha256(draft.encode()).hexdigest()


def tokens(text: str) -> list[str]:
    return [w for w in _TOKEN.findall(text.lower()) if w not in _STOP]


def _coverage(needles: Sequence[str], haystack: set[str]) -> float:
    """Share of ``needles`` found in ``haystack``; NaN when there is nothing to look for."""
    if not needles:
        return math.nan
    return sum(1 for w in needles if w in haystack) / len(needles)


class LexicalJudge:
    """Deterministic reference-based metrics from content-token overlap.

    - faithfulness: share of the draft's tokens found in the contexts;
    - answer_relevancy: mean of the share of question tokens and of
      ground-truth tokens that the draft covers;
    - context_precision: average precision of the contexts ranked as given,
      a context being relevant when it shares a token with the ground truth
      (or the question when there is no ground truth);
    - context_recall: share of ground-truth tokens found in the contexts.

    An empty draft scores 0 on the draft metrics (it answers nothing). A
    scenario with no contexts gets NaN for the three context metrics and says so.
    """

    name = LEXICAL_NAME
    prompt_version = LEXICAL_VERSION

    def score(self, question: str, contexts: Sequence[str], ground_truth: str, draft: str) -> JudgeResult:
        d_tok, q_tok, g_tok = tokens(draft), tokens(question), tokens(ground_truth)
        ctx_sets = [set(tokens(c)) for c in contexts]
        ctx_all = set().union(*ctx_sets) if ctx_sets else set()
        draft_set = set(d_tok)
        relevancy_parts = [v for v in (_coverage(q_tok, draft_set), _coverage(g_tok, draft_set)) if not math.isnan(v)]
        relevancy = sum(relevancy_parts) / len(relevancy_parts) if relevancy_parts else math.nan
        if not d_tok:
            relevancy = 0.0
        error = ""
        if not contexts:
            faith = precision = recall = math.nan
            error = NO_CONTEXTS_ERROR
        else:
            faith = _coverage(d_tok, ctx_all) if d_tok else 0.0
            target = set(g_tok or q_tok)
            hits, ap = 0, 0.0
            for rank, ctx in enumerate(ctx_sets, start=1):
                if ctx & target:
                    hits += 1
                    ap += hits / rank
            precision = ap / hits if hits else 0.0
            recall = _coverage(g_tok, ctx_all)
            if math.isnan(recall):  # no ground truth: fall back to the question
                recall = _coverage(q_tok, ctx_all)
        metrics = {
            "faithfulness": faith,
            "answer_relevancy": relevancy,
            "context_precision": precision,
            "context_recall": recall,
        }
        metrics = {m: (math.nan if v is None else float(v)) for m, v in metrics.items()}
        return JudgeResult(metrics, self.name, self.prompt_version, error=error)


class JudgeParseError(ValueError):
    """A judge reply that is not one JSON object with the four metrics in [0, 1]."""


_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def parse_judge_reply(text: str) -> dict[str, float]:
    """The four metrics from a judge reply, or :class:`JudgeParseError` saying what is wrong."""
    match = _OBJECT.search(text or "")
    if not match:
        raise JudgeParseError(f"no JSON object in judge reply: {text[:120]!r}")
    try:
        obj = json.loads(match.group(0))
    except json.JSONDecodeError as exc:
        raise JudgeParseError(f"judge reply is not valid JSON ({exc.msg}): {text[:120]!r}") from None
    if not isinstance(obj, dict):
        raise JudgeParseError("judge reply JSON is not an object")
    out: dict[str, float] = {}
    for m in METRICS:
        value = obj.get(m)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
            raise JudgeParseError(f"judge reply: {m} must be a number in [0, 1], got {value!r}")
        out[m] = float(value)
    return out


def llm_judge_name(model: str) -> str:
    return f"llm:{model}"


async def llm_judge(
    chat: Callable[[ChatRequest], Awaitable[Completion]],
    model: str,
    scenario: Scenario,
    draft: str,
    *,
    max_tokens: int = 128,
    seed: int | None = 0,
    parse_retries: int = 2,
) -> JudgeResult:
    """Judge one draft of ``scenario`` (its question, contexts and gold answer) with an LLM; tokens of every
    attempt are counted.

    A provider error propagates (the caller records it); an unparsable reply
    after ``parse_retries`` retries gives NaN metrics with the error.
    """
    prompt_tokens = completion_tokens = 0
    error = ""
    modes: set[str] = set()
    for attempt in range(1, parse_retries + 2):
        request = ChatRequest(
            model=model,
            messages=judge_messages(scenario.question, scenario.contexts, scenario.ground_truth, draft, attempt),
            max_tokens=max_tokens,
            temperature=0.0,
            seed=seed,
        )
        completion = await chat(request)
        prompt_tokens += completion.usage.prompt_tokens
        completion_tokens += completion.usage.completion_tokens
        modes.add(completion.mode)
        try:
            metrics = parse_judge_reply(completion.content)
        except JudgeParseError as exc:
            error = f"attempt {attempt}: {exc}"
            continue
        return JudgeResult(
            metrics, llm_judge_name(model), JUDGE_PROMPT_VERSION, prompt_tokens, completion_tokens,
            attempts=attempt, mode=BATCH if modes == {BATCH} else LIVE,
        )  # fmt: skip
    nan = {m: math.nan for m in METRICS}
    return JudgeResult(
        nan,
        llm_judge_name(model),
        JUDGE_PROMPT_VERSION,
        prompt_tokens,
        completion_tokens,
        error,
        attempts=parse_retries + 1,
        mode=BATCH if modes == {BATCH} else LIVE,
    )
