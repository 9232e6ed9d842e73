"""What an OpenAI-compatible reply body says: its text, its usage, its error message.

The live client and the Batch API's result lines read bodies of the same shape, so the reading
exists once here.
"""

from __future__ import annotations

import json
import math
from typing import Any

from shp_ray.providers.base import ChatRequest, Usage
from shp_ray.providers.tokens import count_tokens


def estimate_prompt_tokens(request: ChatRequest) -> int:
    """Before the call: a generous estimate (regex tokens or chars/4, whichever is larger)."""
    return sum(max(count_tokens(c), math.ceil(len(c) / 4)) + 4 for _, c in request.messages)


def reply_content(data: Any) -> tuple[str | None, str]:
    """The text of a ``chat.completion`` body's first choice, or (None, what is missing).

    A reply without text (no choices, no message, a null, empty or blank content) is a failed
    attempt, never a draft: stored, it would be an empty draft for good, as a rerun skips it.
    """
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices:
        return None, "no choices"
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    if not isinstance(message, dict):
        return None, "no message"
    content = message.get("content")
    if content is None:
        return None, "message.content is null"
    if not isinstance(content, str):
        return None, "message.content is not a string"
    if not content.strip():
        return None, "message.content is empty"
    return content, ""


def reply_logprobs(data: Any) -> tuple[float, ...] | None:
    """The first choice's token log-probabilities (``choices[0].logprobs.content[].logprob``, as OpenAI and
    llama-server return them with ``logprobs: true``), or None when the reply carries none or not in that shape:
    a provider that does not return them leaves the draft without, never with zeros."""
    try:
        content = data["choices"][0]["logprobs"]["content"]
        values = tuple(float(item["logprob"]) for item in content)
    except (TypeError, KeyError, IndexError, ValueError):
        return None
    return values or None


def reply_usage(raw: Any, request: ChatRequest, content: str) -> Usage:
    """The provider's reported usage; if it reports none, our own count (the sim tokenizer)."""
    try:
        return Usage(int(raw["prompt_tokens"]), int(raw["completion_tokens"]))
    except (TypeError, KeyError, ValueError):
        return Usage(estimate_prompt_tokens(request), count_tokens(content))


def error_message(body: bytes | object) -> str:
    """An error reply's message and code (``body`` raw, or already decoded as in a batch error file)."""
    try:
        data = json.loads(body) if isinstance(body, bytes) else body
        err = data.get("error", data) if isinstance(data, dict) else data
        msg = err.get("message", "") if isinstance(err, dict) else str(err)
        code = err.get("code") or err.get("type") or "" if isinstance(err, dict) else ""
        return f"{msg} [{code}]" if code and str(code) not in str(msg) else str(msg)
    except (ValueError, AttributeError):
        return body[:200].decode("utf-8", "replace") if isinstance(body, bytes) else str(body)[:200]
