"""Reading a finished batch's output and error files into Completions and per-line errors.

An output line is ``{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}``
with the ``chat.completion`` the live endpoint would have returned as its body; an error-file line
has a non-200 ``response`` (the endpoint's error reply) or ``response: null`` and an ``error``
``{code, message}`` for a request never run (``batch_expired``, ``batch_cancelled``). Lines come
in no particular order: everything is keyed by ``custom_id``.

One bad line never spoils the rest: a line that is not JSON, or names no custom_id, is counted in
``malformed`` with its file and line number and reading goes on. Its request shows up in
:meth:`BatchResults.missing`, to be sent again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from shp_ray.providers.base import Completion, Usage
from shp_ray.providers.client import redact
from shp_ray.providers.reply import error_message, reply_content, reply_logprobs
from shp_ray.providers.retry_policy import is_retryable_status

# A request the batch never ran can run in the next one; other codes are about the request itself.
RETRYABLE_CODES = frozenset({"batch_expired", "batch_cancelled", "request_timeout"})


@dataclass(frozen=True)
class LineError:
    """Why one request of a batch has no completion. ``status`` is None for a request never run."""

    status: int | None
    code: str
    message: str
    retryable: bool


@dataclass(frozen=True)
class BatchResults:
    completions: dict[str, Completion] = field(default_factory=dict)  # by custom_id
    errors: dict[str, LineError] = field(default_factory=dict)  # by custom_id
    malformed: tuple[tuple[str, int], ...] = ()  # ("output" | "error", 1-based line) of unreadable lines

    @property
    def malformed_count(self) -> int:
        return len(self.malformed)

    def missing(self, custom_ids: Iterable[str]) -> list[str]:
        """The ids asked for that have neither a completion nor an error (a malformed line's, say)."""
        return [c for c in custom_ids if c not in self.completions and c not in self.errors]

    def retryable(self) -> list[str]:
        """The ids worth sending again: retryable errors (the missing ones are the caller's to add)."""
        return sorted(c for c, e in self.errors.items() if e.retryable)


def _completion(body: Any) -> Completion | None:
    """The Completion of a 200 body, or None if it lacks text or an integer usage."""
    content, _ = reply_content(body)
    if content is None:  # no text: a failed line, sent again like any retryable one (never a draft)
        return None
    try:
        usage = Usage(int(body["usage"]["prompt_tokens"]), int(body["usage"]["completion_tokens"]))
    except (TypeError, KeyError, IndexError, ValueError):
        return None
    # latency_s stays 0: a batch line has no wait of its own (the batch's timestamps have the wall time)
    return Completion(content=content, usage=usage, model=str(body.get("model") or ""), logprobs=reply_logprobs(body))


def _line_error(item: dict[str, Any], key: str) -> LineError:
    response, error = item.get("response"), item.get("error")
    if isinstance(response, dict) and response.get("status_code") not in (None, 200):
        status = int(response["status_code"])
        body = response.get("body")
        err = body.get("error") if isinstance(body, dict) else None
        code = str(err.get("code") or err.get("type") or status) if isinstance(err, dict) else str(status)
        return LineError(status, code, redact(error_message(body), key)[:300], is_retryable_status(status))
    if isinstance(error, dict):
        code = str(error.get("code") or "unknown")
        return LineError(None, code, redact(str(error.get("message") or ""), key)[:300], code in RETRYABLE_CODES)
    # a 200 without a usable completion: billed, but no answer to keep; the live client retries these too
    return LineError(200, "malformed_body", "a 200 reply without text or without an integer usage", True)


def read_results(output: bytes = b"", errors: bytes = b"", *, key: str = "") -> BatchResults:
    """Completions and errors by custom_id from the two files' bytes (``key``: redacted from messages)."""
    completions: dict[str, Completion] = {}
    failures: dict[str, LineError] = {}
    malformed: list[tuple[str, int]] = []
    for which, content in (("output", output), ("error", errors)):
        for n, raw in enumerate(content.split(b"\n"), start=1):
            if not raw.strip():
                continue
            try:
                item = json.loads(raw)
            except (ValueError, UnicodeDecodeError):
                item = None
            custom_id = item.get("custom_id") if isinstance(item, dict) else None
            if not isinstance(item, dict) or not isinstance(custom_id, str) or not custom_id:
                malformed.append((which, n))
                continue
            response = item.get("response")
            done = None
            if isinstance(response, dict) and response.get("status_code") == 200:
                done = _completion(response.get("body"))
            if done is not None:
                completions[custom_id] = done
                failures.pop(custom_id, None)  # an answer outranks an error for the same id
            elif custom_id not in completions:
                failures[custom_id] = _line_error(item, key)
    return BatchResults(completions, failures, tuple(malformed))
