"""Judges: the lexical reference-based judge, JSON parsing, the LLM judge's retries, the cache key."""

from __future__ import annotations

import asyncio
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shp_ray.generation.datasets import Scenario
from shp_ray.generation.judge import (
    LEXICAL_NAME,
    JudgeParseError,
    LexicalJudge,
    judge_key,
    llm_judge,
    parse_judge_reply,
)
from shp_ray.policy.scoring import METRICS
from shp_ray.providers.base import ChatRequest, Completion, Usage

Q = "Which river flows through Paris?"
C = ("The Seine flows through Paris, the capital of France.", "Lyon lies on the Rhone and the Saone.")
GT = "The Seine"
SCN = Scenario("paris", "hotpotqa", "test", Q, C, GT)


def test_lexical_judge_is_named_honestly_and_deterministic() -> None:
    j = LexicalJudge()
    a = j.score(Q, C, GT, "The Seine flows through Paris.")
    b = j.score(Q, C, GT, "The Seine flows through Paris.")
    assert a == b and "not an LLM" in a.judge and a.judge == LEXICAL_NAME
    assert a.tokens == 0 and a.error == ""


def test_lexical_judge_ranks_a_grounded_answer_above_an_unsupported_one() -> None:
    j = LexicalJudge()
    good = j.score(Q, C, GT, "The Seine flows through Paris.")
    bad = j.score(Q, C, GT, "Bananas are yellow fruit grown in Ecuador.")
    assert good.metrics["faithfulness"] > bad.metrics["faithfulness"]
    assert good.metrics["answer_relevancy"] > bad.metrics["answer_relevancy"]
    # context metrics measure retrieval: the same for both drafts
    assert good.metrics["context_recall"] == bad.metrics["context_recall"] == 1.0
    assert good.metrics["context_precision"] == 1.0  # the relevant context ranks first


def test_lexical_context_precision_reads_the_ranking() -> None:
    j = LexicalJudge()
    first = j.score(Q, C, GT, "x").metrics["context_precision"]
    second = j.score(Q, tuple(reversed(C)), GT, "x").metrics["context_precision"]
    assert first == 1.0 and second == pytest.approx(0.5)


@settings(max_examples=200, deadline=None)
@given(
    q=st.text(max_size=60),
    ctx=st.lists(st.text(max_size=80), max_size=4),
    gt=st.text(max_size=30),
    draft=st.text(max_size=120),
)
def test_lexical_metrics_are_in_unit_interval_or_nan(q, ctx, gt, draft) -> None:
    r = LexicalJudge().score(q, tuple(ctx), gt, draft)
    for m in METRICS:
        v = r.metrics[m]
        assert math.isnan(v) or 0.0 <= v <= 1.0
    if not ctx:
        assert math.isnan(r.metrics["faithfulness"]) and "no contexts" in r.error


def test_parse_judge_reply() -> None:
    good = {"faithfulness": 0.9, "answer_relevancy": 1, "context_precision": 0.0, "context_recall": 0.5}
    assert parse_judge_reply("Sure! " + json.dumps(good) + " done") == {k: float(v) for k, v in good.items()}
    for bad in ("no json here", "{not json}", json.dumps({**good, "faithfulness": 1.5}), "[1, 2]",
                json.dumps({k: v for k, v in good.items() if k != "context_recall"}),
                json.dumps({**good, "answer_relevancy": True})):  # fmt: skip
        with pytest.raises(JudgeParseError):
            parse_judge_reply(bad)


def _chat(replies: list[str]):
    seen: list[ChatRequest] = []

    async def chat(request: ChatRequest) -> Completion:
        seen.append(request)
        return Completion(replies[len(seen) - 1], Usage(10, 5))

    return chat, seen


def test_llm_judge_retries_a_bad_reply_with_a_different_request() -> None:
    ok = json.dumps(dict.fromkeys(METRICS, 0.7))
    chat, seen = _chat(["not json", ok])
    r = asyncio.run(llm_judge(chat, "m", SCN, "The Seine."))
    assert r.metrics == dict.fromkeys(METRICS, 0.7) and r.error == "" and r.attempts == 2
    assert (r.prompt_tokens, r.completion_tokens) == (20, 10)  # both attempts are counted
    assert seen[0].cache_key() != seen[1].cache_key()  # a cached bad reply cannot repeat itself
    assert "You are the judge" in seen[0].messages[0][1]


def test_llm_judge_gives_nan_never_zero_after_retries() -> None:
    chat, seen = _chat(["nope", "still nope", "{bad"])
    r = asyncio.run(llm_judge(chat, "m", SCN, "d", parse_retries=2))
    assert len(seen) == 3 and all(math.isnan(v) for v in r.metrics.values())
    assert "attempt 3" in r.error and r.tokens == 45


def test_judge_key_is_never_the_draft_alone() -> None:
    draft = "It depends on the context."
    k = judge_key("j", "v1", Q, C, GT, draft)
    assert k != judge_key("j", "v1", "Who wrote Hamlet?", C, GT, draft)
    assert k != judge_key("j", "v1", Q, C[:1], GT, draft)
    assert k != judge_key("j", "v1", Q, C, "Rhone", draft)
    assert k != judge_key("j2", "v1", Q, C, GT, draft)
    assert k != judge_key("j", "v2", Q, C, GT, draft)
    assert k != judge_key("j", "v1", Q, C, GT, draft, metrics=("faithfulness",))
    assert k == judge_key("j", "v1", Q, list(C), GT, draft)
