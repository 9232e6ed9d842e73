"""Requests, lines and raw uploads shared by the Batch API tests (server side and client side)."""

from __future__ import annotations

import json
from typing import Any

from openai import OpenAI

from shp_ray.providers.base import ChatRequest
from shp_ray.providers.batch_files import request_line


def writer_requests(n: int, topic: str = "canal", max_tokens: int = 64) -> list[ChatRequest]:
    """``n`` distinct Writer calls (rounds 1-3), as the generation loop sends them."""
    return [
        ChatRequest(
            model="sim-1",
            messages=(
                ("system", "You are the Writer."),
                ("user", f"Question: Who built the {topic} number {i}?\nRound: {1 + i % 3}"),
            ),
            max_tokens=max_tokens,
        )
        for i in range(n)
    ]


def lines_for(requests: list[ChatRequest], prefix: str = "r") -> list[dict[str, Any]]:
    return [request_line(f"{prefix}{i}", r) for i, r in enumerate(requests)]


def raw_batch(base_url: str, content: bytes, **create: Any) -> str:
    """Upload ``content`` as it is (no client-side checks) and create a batch of it; the batch id."""
    sdk = OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    upload = sdk.files.create(file=("raw.jsonl", content), purpose="batch")
    args = {"endpoint": "/v1/chat/completions", "completion_window": "24h", **create}
    return sdk.batches.create(input_file_id=upload.id, **args).id


def jsonl(*objs: Any) -> bytes:
    return b"".join((o if isinstance(o, bytes) else json.dumps(o).encode()) + b"\n" for o in objs)
