"""What the simulated server answers to one ``/v1/chat/completions`` body, wherever the body arrives.

The live route (:mod:`app`) and the Batch API (:mod:`batch`) both call these, so a request
sent live and the same request sent as a batch line get the same reply text and token counts:
the parse, the checks and the ``chat.completion`` object exist once. Rate limits, faults and
latency are the caller's; nothing here waits or counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shp_ray.providers.sim.replies import ReplyOptions, reply_text, token_logprobs
from shp_ray.providers.tokens import count_tokens, prompt_tokens, split_tokens, truncate_tokens


class BadChat(Exception):
    """A body the server refuses: ``status`` (400, 404) and the error ``kind`` it answers with."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


@dataclass(frozen=True)
class Chat:
    model: str
    messages: list[tuple[str, str]]
    max_tokens: int
    sample: int | None = None  # a sampled request's seed (temperature > 0): drafts vary with it; None: greedy
    logprobs: bool = False  # the reply carries each token's log-probability (choices[0].logprobs.content)

    @property
    def prompt_tokens(self) -> int:
        return prompt_tokens(self.messages)


def parse_chat(body: Any, models: tuple[str, ...] = ()) -> Chat:
    """The chat a decoded JSON body asks for, or :class:`BadChat` (``models``: the served ones; empty = any)."""
    try:
        messages = [(str(m["role"]), str(m.get("content") or "")) for m in body["messages"]]
        model = str(body["model"])
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 256)
        sample = int(body.get("seed") or 0) if float(body.get("temperature") or 0) > 0 else None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BadChat(400, f"bad request body: {type(exc).__name__}") from None
    if body.get("stream"):
        raise BadChat(400, "the simulated server does not stream")
    if models and model not in models:
        raise BadChat(404, f"model {model!r} not found", "not_found_error")
    return Chat(model, messages, max_tokens, sample, body.get("logprobs") is True)


def chat_completion(replies: ReplyOptions, chat: Chat, *, reply_id: str, created: int) -> dict[str, Any]:
    """The ``chat.completion`` object: the deterministic reply, cut at ``max_tokens``, with real usage."""
    text, cut = truncate_tokens(reply_text(replies, chat.messages, chat.sample), chat.max_tokens)
    n_prompt, n_completion = chat.prompt_tokens, count_tokens(text)
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": text},
        "finish_reason": "length" if cut else "stop",
    }
    if chat.logprobs:  # the shape OpenAI and llama-server answer ``logprobs: true`` with
        toks = split_tokens(text)
        lps = token_logprobs(replies, chat.messages, toks)
        items = [{"token": t, "logprob": v, "top_logprobs": []} for t, v in zip(toks, lps, strict=True)]
        choice["logprobs"] = {"content": items}
    return {
        "id": reply_id,
        "object": "chat.completion",
        "created": created,
        "model": chat.model,
        "system_fingerprint": "shp-serve-simulated",
        "choices": [choice],
        "usage": {
            "prompt_tokens": n_prompt,
            "completion_tokens": n_completion,
            "total_tokens": n_prompt + n_completion,
        },
    }


def error_body(status: int, message: str, kind: str, param: str | None = None) -> dict[str, Any]:
    """An OpenAI-style error object (``code`` is the HTTP status, as this server has always sent it)."""
    return {"error": {"message": message, "type": kind, "param": param, "code": status}}
