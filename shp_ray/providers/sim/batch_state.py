"""What the simulated Batch API keeps in memory: files, batches and the counters tests read.

A :class:`BatchJob` is a batch as the server tracks it; ``as_dict`` is the Batch object of the
protocol (the fields and nulls OpenAI's has, timestamps in whole Unix seconds). Its status only
moves forward -- validating -> in_progress -> finalizing -> completed, or to failed, expired,
cancelling -> cancelled -- and each move stamps its ``<status>_at``.
"""

from __future__ import annotations

import asyncio
import collections
from dataclasses import dataclass, field
from typing import Any

from shp_ray.providers.batch_files import TERMINAL_STATUSES


@dataclass
class SimFile:
    id: str
    filename: str
    purpose: str  # batch (uploaded) | batch_output (written by the server)
    content: bytes
    created_at: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.content),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "expires_at": None,
            "status_details": None,
        }


@dataclass
class BatchJob:
    seq: int  # creation order: the list is newest first by it (created_at ties within a second)
    id: str
    input_file_id: str
    endpoint: str
    completion_window: str
    metadata: dict[str, str] | None
    created: float  # wall clock
    deadline: float  # wall clock at which it expires
    status: str = "validating"
    stamps: dict[str, int] = field(default_factory=dict)
    total: int = 0
    completed: int = 0
    failed: int = 0
    errors: list[dict[str, Any]] | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    model: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    enqueued_tokens: int = 0  # the prompt tokens it holds against the enqueued-token limit while running
    cancel_requested: bool = False
    wake: asyncio.Event = field(default_factory=asyncio.Event)  # set on cancel: a waiting phase ends early
    task: asyncio.Task[None] | None = None  # held so the running batch is not garbage-collected

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    def move(self, status: str, now: float) -> None:
        self.status = status
        self.stamps[f"{status}_at"] = int(now)

    def as_dict(self) -> dict[str, Any]:
        stamp = self.stamps.get
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "model": self.model,
            "errors": {"object": "list", "data": list(self.errors)} if self.errors else None,
            "input_file_id": self.input_file_id,
            "completion_window": self.completion_window,
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": int(self.created),
            "in_progress_at": stamp("in_progress_at"),
            "expires_at": int(self.deadline),
            "finalizing_at": stamp("finalizing_at"),
            "completed_at": stamp("completed_at"),
            "failed_at": stamp("failed_at"),
            "expired_at": stamp("expired_at"),
            "cancelling_at": stamp("cancelling_at"),
            "cancelled_at": stamp("cancelled_at"),
            "request_counts": {"total": self.total, "completed": self.completed, "failed": self.failed},
            "usage": {
                "input_tokens": self.prompt_tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": self.completion_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": self.prompt_tokens + self.completion_tokens,
            },
            "metadata": dict(self.metadata) if self.metadata is not None else None,
        }


@dataclass
class BatchStats:
    """What the Batch API did; ``ok_by_custom_id`` shows a request was never answered (so paid) twice."""

    files_uploaded: int = 0
    batches_created: int = 0
    batches_final: collections.Counter[str] = field(default_factory=collections.Counter)  # by terminal status
    lines_processed: int = 0  # answered, well or with an error: work the server did
    lines_ok: int = 0
    lines_failed: int = 0  # answered with an error (an injected fault, or a body the chat route refuses)
    lines_expired: int = 0  # never answered: the batch expired first
    lines_cancelled: int = 0  # never answered: the batch was cancelled first
    malformed_lines: int = 0  # answered, but written to the output file as broken JSON
    tokens: int = 0  # prompt + completion of the lines answered well (none count against the live limits)
    ok_by_custom_id: collections.Counter[str] = field(default_factory=collections.Counter)

    def as_dict(self) -> dict[str, Any]:
        return {
            "files_uploaded": self.files_uploaded,
            "batches_created": self.batches_created,
            "batches_final": dict(self.batches_final),
            "lines_processed": self.lines_processed,
            "lines_ok": self.lines_ok,
            "lines_failed": self.lines_failed,
            "lines_expired": self.lines_expired,
            "lines_cancelled": self.lines_cancelled,
            "malformed_lines": self.malformed_lines,
            "tokens": self.tokens,
            "ok_by_custom_id": dict(self.ok_by_custom_id),
        }
