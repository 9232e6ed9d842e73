"""An async client of the OpenAI Batch API for any OpenAI-compatible endpoint (the openai SDK underneath).

``submit`` uploads one input file (:mod:`batch_files`) and creates its batch; ``retrieve`` and
``wait`` follow it; ``results`` reads its output and error files (:mod:`batch_results`);
``find`` looks a batch up by its metadata, so a run that crashed right after creating one adopts
it instead of paying for a second; ``cancel`` stops one.

HTTP faults become :class:`ProviderError` with the live client's classification (429 / 408 /
5xx / timeouts retryable, other 4xx not) and no key in the text. The SDK retries the idempotent
calls itself; creating a batch is never retried blindly -- after a lost reply, the batch made
from the same input file is looked for first, and adopted if it exists.

The key is read from the environment variable named by ``ProviderSpec.api_key_env`` and never
logged, shown in ``repr`` or put in an exception.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from shp_ray.providers.base import ProviderError, ProviderSpec
from shp_ray.providers.batch_files import (
    BATCH_ENDPOINT,
    COMPLETION_WINDOW,
    TERMINAL_STATUSES,
    BatchLimits,
    encode_file,
    split_lines,
)
from shp_ray.providers.batch_results import BatchResults, read_results
from shp_ray.providers.client import read_key, redact
from shp_ray.providers.reply import error_message
from shp_ray.providers.retry_policy import should_retry
from shp_ray.redaction import redact_text

if TYPE_CHECKING:  # the SDK is imported where a batch is called: ~0.7 s that every sweep process would pay
    import openai

T = TypeVar("T")
NO_KEY = "no-key"  # the SDK insists on a key; a local server without one ignores this placeholder
CREATE_ATTEMPTS = 3  # creating a batch: tries, each after a look for the batch a lost reply may have made


@dataclass(frozen=True)
class BatchCounts:
    total: int = 0
    completed: int = 0
    failed: int = 0


@dataclass(frozen=True)
class BatchError:
    """Why a batch failed validation (``line``: 1-based in the input file, when one line is at fault)."""

    code: str
    message: str
    line: int | None = None
    param: str | None = None


@dataclass(frozen=True)
class BatchState:
    id: str
    status: str  # validating | in_progress | finalizing | completed | failed | expired | cancelling | cancelled
    output_file_id: str | None = None
    error_file_id: str | None = None
    counts: BatchCounts = field(default_factory=BatchCounts)
    errors: tuple[BatchError, ...] = ()
    metadata: dict[str, str] = field(default_factory=dict)
    input_file_id: str = ""
    created_at: int = 0

    @property
    def terminal(self) -> bool:
        """No further change: its files (if any) are final."""
        return self.status in TERMINAL_STATUSES


def _state(batch: Any) -> BatchState:
    counts = batch.request_counts
    errors = batch.errors.data if batch.errors is not None and batch.errors.data else []
    return BatchState(
        id=batch.id,
        status=batch.status,
        output_file_id=batch.output_file_id,
        error_file_id=batch.error_file_id,
        counts=BatchCounts(counts.total, counts.completed, counts.failed) if counts is not None else BatchCounts(),
        errors=tuple(BatchError(e.code or "", e.message or "", e.line, e.param) for e in errors),
        metadata=dict(batch.metadata or {}),
        input_file_id=batch.input_file_id,
        created_at=batch.created_at,
    )


class BatchAPI:
    """``await BatchAPI(spec).submit(lines, metadata={...})`` and so on; one per endpoint and key."""

    def __init__(self, spec: ProviderSpec, *, limits: BatchLimits | None = None) -> None:
        if not spec.base_url:
            raise ValueError(f"ProviderSpec(kind={spec.kind!r}).base_url is empty: say which endpoint to call")
        self.spec = spec
        self.endpoint = redact_text(spec.base_url)
        self.limits = limits or BatchLimits()
        self._key = read_key(spec, self.endpoint)
        # one SDK client per event loop (its HTTP pool is bound to the loop that made it), gone with the loop
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, openai.AsyncOpenAI] = (
            weakref.WeakKeyDictionary()
        )

    def __repr__(self) -> str:  # never the key
        return f"BatchAPI(endpoint={self.endpoint!r})"

    def _client(self) -> openai.AsyncOpenAI:
        """The SDK client of the running loop."""
        import openai

        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = openai.AsyncOpenAI(
                api_key=self._key or NO_KEY,
                base_url=self.spec.base_url,
                timeout=self.spec.timeout_s,
                max_retries=self.spec.max_retries,
            )
            self._clients[loop] = client
        return client

    async def aclose(self) -> None:
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()

    async def __aenter__(self) -> BatchAPI:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _call(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        """``await call()``, its SDK errors as ProviderError (raised outside the handler: no chained SDK text)."""
        import openai

        try:
            return await call()
        except openai.APIStatusError as exc:
            detail = error_message(exc.response.content)
            retry = should_retry(exc.status_code, dict(exc.response.headers), detail)
            err = ProviderError(
                f"{self.endpoint}: HTTP {exc.status_code} on {what}: {redact(detail, self._key)[:300]}",
                status=exc.status_code,
                retryable=retry,
            )
        except openai.APITimeoutError:
            err = ProviderError(f"{self.endpoint}: no reply within {self.spec.timeout_s} s on {what}", retryable=True)
        except openai.APIConnectionError as exc:
            err = ProviderError(f"{self.endpoint}: connection failed on {what} ({type(exc).__name__})", retryable=True)
        except openai.OpenAIError as exc:  # e.g. a reply that is not the expected object
            err = ProviderError(f"{self.endpoint}: {what}: {redact(str(exc), self._key)[:300]}", retryable=False)
        raise err

    # -- the protocol --------------------------------------------------------------------------
    async def submit(self, lines: Sequence[dict[str, Any]], *, metadata: dict[str, str] | None = None) -> str:
        """Upload ``lines`` as one input file and create its batch; returns the batch id.

        ``lines`` must make one provider-valid file (one model, within ``limits``): split a larger
        list with :func:`split_lines` and submit each part.
        """
        files = split_lines(lines, self.limits)
        if len(files) != 1:
            raise ValueError(f"{len(lines)} lines make {len(files)} batch files; submit each of split_lines(...)")
        client = self._client()
        content = encode_file(files[0])
        name = f"shp-batch-{int(time.time())}.jsonl"
        upload = await self._call("upload", lambda: client.files.create(file=(name, content), purpose="batch"))
        once = client.with_options(max_retries=0)  # a retried create could make a second batch
        meta = dict(metadata) if metadata else None
        attempt = 0
        while True:
            attempt += 1
            try:
                batch = await self._call(
                    "create batch",
                    lambda: once.batches.create(
                        input_file_id=upload.id,
                        endpoint=BATCH_ENDPOINT,
                        completion_window=COMPLETION_WINDOW,
                        metadata=meta,
                    ),
                )
                return str(batch.id)
            except ProviderError as exc:
                if not exc.retryable:  # refused for good: no batch uses the upload, so it goes
                    with contextlib.suppress(ProviderError):
                        await self._call("delete upload", lambda: client.files.delete(upload.id))
                    raise
                made = await self._made_from(upload.id)
                if made is not None:
                    return made.id  # the reply was lost, not the batch
                if attempt >= CREATE_ATTEMPTS:
                    raise
            await asyncio.sleep(min(4.0, 0.5 * 2**attempt))

    async def _made_from(self, input_file_id: str) -> BatchState | None:
        """The newest batch created from ``input_file_id`` (among the latest 100), if any."""
        page = await self._call("list batches", lambda: self._client().batches.list(limit=100))
        return next((_state(b) for b in page.data if b.input_file_id == input_file_id), None)

    async def retrieve(self, batch_id: str) -> BatchState:
        return _state(await self._call(f"retrieve {batch_id}", lambda: self._client().batches.retrieve(batch_id)))

    async def wait(self, batch_id: str, *, poll_s: float = 10.0, timeout_s: float | None = None) -> BatchState:
        """Poll until the batch is terminal (or ``timeout_s`` passes: its latest state, not terminal)."""
        t0 = time.monotonic()
        while True:
            state = await self.retrieve(batch_id)
            if state.terminal or (timeout_s is not None and time.monotonic() - t0 >= timeout_s):
                return state
            await asyncio.sleep(poll_s)

    async def find(self, metadata_key: str, value: str, *, scan: int = 1000) -> BatchState | None:
        """The newest batch whose ``metadata[metadata_key] == value`` among the latest ``scan``; None if none."""
        client = self._client()

        async def first() -> BatchState | None:
            seen = 0
            async for batch in client.batches.list(limit=100):
                if (batch.metadata or {}).get(metadata_key) == value:
                    return _state(batch)
                seen += 1
                if seen >= scan:
                    break
            return None

        return await self._call("list batches", first)

    async def download(self, state: BatchState) -> tuple[bytes, bytes]:
        """The raw output and error files of a batch (b"" for one it has not got)."""
        client = self._client()
        parts: list[bytes] = []
        for file_id in (state.output_file_id, state.error_file_id):
            if not file_id:
                parts.append(b"")
                continue
            reply = await self._call(f"download {file_id}", functools.partial(client.files.content, file_id))
            parts.append(reply.content)
        return parts[0], parts[1]

    def parse(self, output: bytes, errors: bytes) -> BatchResults:
        """The completions and errors of downloaded files (no key in any message)."""
        return read_results(output, errors, key=self._key)

    async def results(self, state: BatchState) -> BatchResults:
        """The completions and errors of a batch's files (read what exists: a cancelled batch has partial ones)."""
        return self.parse(*await self.download(state))

    async def cancel(self, batch_id: str) -> BatchState:
        return _state(await self._call(f"cancel {batch_id}", lambda: self._client().batches.cancel(batch_id)))
