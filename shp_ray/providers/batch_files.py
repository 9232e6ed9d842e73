"""The Batch API's input files: one JSONL line per chat request, split into files a provider accepts.

A line is ``{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body"}`` with the body
the live client would POST for the same :class:`ChatRequest` (``ChatRequest.openai_body``), so a
batch and a live run of the same requests are the same requests. A provider takes a file only if
its ``custom_id``s are unique, it names one model, and it stays within a line count and a size
(OpenAI: 50,000 lines, 200 MB): :func:`split_lines` cuts a request list along those rules.

The client (:mod:`batch_api`) and the simulated server (:mod:`sim.batch`) share these constants.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from shp_ray.providers.base import ChatRequest

BATCH_ENDPOINT: Final = "/v1/chat/completions"  # Final: the literal the OpenAI client's types ask for
COMPLETION_WINDOW: Final = "24h"
MAX_LINES = 50_000
MAX_BYTES = 200 * 1024 * 1024
ACTIVE_STATUSES = ("validating", "in_progress", "finalizing", "cancelling")
TERMINAL_STATUSES = ("completed", "failed", "expired", "cancelled")
# A batch's metadata as OpenAI bounds it: 16 pairs, keys up to 64 characters, values up to 512.
METADATA_PAIRS, METADATA_KEY_CHARS, METADATA_VALUE_CHARS = 16, 64, 512


@dataclass(frozen=True)
class BatchLimits:
    """What one input file may hold (the defaults are OpenAI's)."""

    max_lines: int = MAX_LINES
    max_bytes: int = MAX_BYTES

    def __post_init__(self) -> None:
        if self.max_lines < 1 or self.max_bytes < 1:
            raise ValueError(f"BatchLimits needs max_lines >= 1 and max_bytes >= 1, got {self}")


def request_line(custom_id: str, request: ChatRequest, *, default_model: str = "") -> dict[str, Any]:
    """The JSONL line asking for ``request``; ``default_model`` stands in for an empty ``request.model``."""
    if not custom_id:
        raise ValueError("a batch line needs a non-empty custom_id: results are matched to requests by it")
    body = request.openai_body(default_model)
    if not body["model"]:
        raise ValueError(f"batch line {custom_id!r}: no model (set ChatRequest.model or default_model)")
    return {"custom_id": custom_id, "method": "POST", "url": BATCH_ENDPOINT, "body": body}


def encode_line(line: dict[str, Any]) -> bytes:
    """One line as uploaded, newline included: split_lines measures exactly what submit sends."""
    return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def encode_file(lines: Iterable[dict[str, Any]]) -> bytes:
    return b"".join(encode_line(line) for line in lines)


def split_lines(lines: Sequence[dict[str, Any]], limits: BatchLimits | None = None) -> list[list[dict[str, Any]]]:
    """``lines`` as input files a provider accepts: one model per file, each within ``limits``.

    Order is kept within a model; models come in the order they first appear. A ``custom_id`` seen
    twice is refused (the results could not be told apart), as is a line larger than a whole file.
    """
    limits = limits or BatchLimits()
    seen: set[str] = set()
    by_model: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        custom_id = line.get("custom_id")
        if not isinstance(custom_id, str) or not custom_id:
            raise ValueError(f"a batch line without a custom_id: {str(line)[:120]}")
        if custom_id in seen:
            raise ValueError(f"custom_id {custom_id!r} appears twice; results are matched to requests by it")
        seen.add(custom_id)
        by_model.setdefault(str(line.get("body", {}).get("model", "")), []).append(line)
    files: list[list[dict[str, Any]]] = []
    for model_lines in by_model.values():
        current: list[dict[str, Any]] = []
        size = 0
        for line in model_lines:
            n = len(encode_line(line))
            if n > limits.max_bytes:
                msg = f"batch line {line['custom_id']!r} is {n} bytes, more than a whole file may hold"
                raise ValueError(f"{msg} ({limits.max_bytes})")
            if current and (len(current) == limits.max_lines or size + n > limits.max_bytes):
                files.append(current)
                current, size = [], 0
            current.append(line)
            size += n
        if current:
            files.append(current)
    return files
