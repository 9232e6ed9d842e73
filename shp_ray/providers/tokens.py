"""Token counting by a regex: each run of word characters and each other non-space character is
one token, and a prompt pays ``MESSAGE_OVERHEAD_TOKENS`` per message.

It is the simulated server's tokenizer (its usage counts are REAL counts of this rule) and the
real client's estimate of a request before it is sent (to reserve rate-limit quota) or of a reply
whose endpoint reported no usage. It lives apart from both so that the client needs nothing of
the simulator.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"\w+|[^\w\s]")
MESSAGE_OVERHEAD_TOKENS = 3


def count_tokens(text: str) -> int:
    """Token count of ``text`` (word runs and single punctuation marks)."""
    return len(_TOKEN.findall(text))


def split_tokens(text: str) -> list[str]:
    """The tokens :func:`count_tokens` counts, in order."""
    return _TOKEN.findall(text)


def prompt_tokens(messages: list[tuple[str, str]]) -> int:
    return sum(count_tokens(content) + MESSAGE_OVERHEAD_TOKENS for _, content in messages)


def truncate_tokens(text: str, max_tokens: int) -> tuple[str, bool]:
    """Cut ``text`` after ``max_tokens`` tokens; returns (text, was_cut)."""
    if max_tokens <= 0:
        return "", bool(text)
    for i, m in enumerate(_TOKEN.finditer(text)):
        if i == max_tokens - 1:
            cut = text[: m.end()]
            return cut, cut.strip() != text.strip()
    return text, False
