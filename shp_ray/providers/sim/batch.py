"""The simulated server's Batch API routes: ``/v1/files`` and ``/v1/batches``, as OpenAI serves them.

- ``POST /v1/files`` (multipart: ``purpose=batch``, ``file``), ``GET /v1/files/{id}``,
  ``GET /v1/files/{id}/content``, ``DELETE /v1/files/{id}``;
- ``POST /v1/batches`` ``{input_file_id, endpoint, completion_window: "24h", metadata}``,
  ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``, ``GET /v1/batches`` (newest first,
  ``limit`` / ``after`` pages with ``has_more``, ``first_id``, ``last_id``).

Requests that cannot be taken are refused at once (4xx, as the live route does); a file that is
taken but wrong fails its batch later, with line-numbered errors (:mod:`batch_input`). Each
batch runs as an asyncio task in the server's loop (:mod:`batch_run`); everything lives in
memory and is gone when the server stops.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import json
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from shp_ray.providers.batch_files import (
    ACTIVE_STATUSES,
    BATCH_ENDPOINT,
    COMPLETION_WINDOW,
    METADATA_KEY_CHARS,
    METADATA_PAIRS,
    METADATA_VALUE_CHARS,
)
from shp_ray.providers.sim.batch_run import BatchRun
from shp_ray.providers.sim.batch_state import BatchJob, BatchStats, SimFile
from shp_ray.providers.sim.chat import error_body
from shp_ray.providers.sim.replies import ReplyOptions

if TYPE_CHECKING:  # the options live with the server that is built from them: a type-only import
    from shp_ray.providers.sim.options import SimOptions

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
MULTIPART_ROOM = 1024 * 1024  # an upload's form framing on top of the file itself


def _error(status: int, message: str, kind: str = "invalid_request_error", param: str | None = None) -> web.Response:
    return web.json_response(error_body(status, message, kind, param), status=status)


def _metadata_problem(metadata: Any) -> str | None:
    if metadata is None:
        return None
    if not isinstance(metadata, dict) or len(metadata) > METADATA_PAIRS:
        return f"metadata must be an object of at most {METADATA_PAIRS} string pairs"
    for k, v in metadata.items():
        if not isinstance(v, str) or len(k) > METADATA_KEY_CHARS or len(v) > METADATA_VALUE_CHARS:
            limits = f"keys are strings up to {METADATA_KEY_CHARS} chars, values up to {METADATA_VALUE_CHARS}"
            return f"metadata {str(k)[:70]!r}: {limits}"
    return None


class SimBatch:
    """The files and batches of one simulated server, its Batch API counters, and the routes."""

    def __init__(
        self,
        options: SimOptions,
        replies: ReplyOptions,
        authorised: Callable[[web.Request], bool],
        stats: BatchStats | None = None,
    ) -> None:
        self.o = options
        self.replies = replies
        self._authorised = authorised
        self.files: dict[str, SimFile] = {}
        self.jobs: dict[str, BatchJob] = {}  # in creation order
        self.seen: collections.Counter[str] = collections.Counter()  # answers given per custom_id: the fault draw's n
        self.stats = stats if stats is not None else BatchStats()
        self.clock = time.time
        self._made = 0

    @property
    def client_max_size(self) -> int:
        """The largest request body the app must accept: a whole input file plus its form framing."""
        return self.o.batch_max_bytes + MULTIPART_ROOM

    def register(self, app: web.Application) -> None:
        r = app.router
        r.add_post("/v1/files", self._guard(self.upload))
        r.add_get("/v1/files/{id}", self._guard(self.file_info))
        r.add_get("/v1/files/{id}/content", self._guard(self.file_content))
        r.add_delete("/v1/files/{id}", self._guard(self.file_delete))
        r.add_post("/v1/batches", self._guard(self.create))
        r.add_get("/v1/batches", self._guard(self.list_batches))
        r.add_get("/v1/batches/{id}", self._guard(self.retrieve))
        r.add_post("/v1/batches/{id}/cancel", self._guard(self.cancel))
        app.on_shutdown.append(self._shutdown)

    def _guard(self, handler: Handler) -> Handler:
        async def guarded(request: web.Request) -> web.StreamResponse:
            if not self._authorised(request):
                return _error(401, "invalid or missing API key")
            return await handler(request)

        return guarded

    async def _shutdown(self, app: web.Application) -> None:
        tasks = [j.task for j in self.jobs.values() if j.task is not None and not j.task.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _new_id(self, prefix: str) -> str:
        self._made += 1
        return prefix + hashlib.sha256(f"{self.o.seed}\x1f{prefix}\x1f{self._made}".encode()).hexdigest()[:24]

    def add_file(self, filename: str, purpose: str, content: bytes) -> SimFile:
        f = SimFile(self._new_id("file-"), filename, purpose, content, int(self.clock()))
        self.files[f.id] = f
        return f

    def enqueued_tokens(self, model: str) -> int:
        """Prompt tokens of the running batches of ``model`` (what an enqueued-token limit counts)."""
        return sum(j.enqueued_tokens for j in self.jobs.values() if j.model == model and j.status in ACTIVE_STATUSES)

    # -- files ---------------------------------------------------------------------------------
    async def upload(self, request: web.Request) -> web.Response:
        try:
            form = await request.post()
        except ValueError as exc:
            return _error(400, f"expected a multipart/form-data upload: {type(exc).__name__}")
        purpose, upload = form.get("purpose"), form.get("file")
        if purpose != "batch":
            return _error(
                400, f"purpose {purpose!r} is not served here; the simulated server takes 'batch'", param="purpose"
            )
        if not isinstance(upload, web.FileField):
            return _error(400, "the form has no 'file' part", param="file")
        content = upload.file.read()
        if len(content) > self.o.batch_max_bytes:
            msg = f"the file is {len(content)} bytes; a batch input file may be at most {self.o.batch_max_bytes}"
            return _error(413, msg, param="file")
        self.stats.files_uploaded += 1
        return web.json_response(self.add_file(upload.filename or "upload.jsonl", "batch", content).as_dict())

    def _file(self, request: web.Request) -> SimFile | web.Response:
        f = self.files.get(request.match_info["id"])
        return f if f is not None else _error(404, f"no such file: {request.match_info['id']}", param="id")

    async def file_info(self, request: web.Request) -> web.Response:
        f = self._file(request)
        return f if isinstance(f, web.Response) else web.json_response(f.as_dict())

    async def file_content(self, request: web.Request) -> web.Response:
        f = self._file(request)
        return (
            f if isinstance(f, web.Response) else web.Response(body=f.content, content_type="application/octet-stream")
        )

    async def file_delete(self, request: web.Request) -> web.Response:
        f = self._file(request)
        if isinstance(f, web.Response):
            return f
        del self.files[f.id]
        return web.json_response({"id": f.id, "object": "file", "deleted": True})

    # -- batches -------------------------------------------------------------------------------
    async def create(self, request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.read())
            if not isinstance(body, dict):
                raise TypeError("not an object")
        except (ValueError, TypeError) as exc:
            return _error(400, f"bad request body: {type(exc).__name__}")
        source = self.files.get(str(body.get("input_file_id")))
        if source is None:
            return _error(404, f"no such file: {body.get('input_file_id')!r}", param="input_file_id")
        if source.purpose != "batch":
            return _error(400, f"file {source.id} has purpose {source.purpose!r}, not 'batch'", param="input_file_id")
        if body.get("endpoint") != BATCH_ENDPOINT:
            return _error(
                400,
                f"endpoint {body.get('endpoint')!r}: the simulated server batches {BATCH_ENDPOINT}",
                param="endpoint",
            )
        if body.get("completion_window") != COMPLETION_WINDOW:
            msg = f"completion_window must be {COMPLETION_WINDOW!r}, got {body.get('completion_window')!r}"
            return _error(400, msg, param="completion_window")
        problem = _metadata_problem(body.get("metadata"))
        if problem is not None:
            return _error(400, problem, param="metadata")
        now = self.clock()
        job = BatchJob(
            seq=len(self.jobs),
            id=self._new_id("batch_"),
            input_file_id=source.id,
            endpoint=BATCH_ENDPOINT,
            completion_window=COMPLETION_WINDOW,
            metadata=body.get("metadata"),
            created=now,
            deadline=now + self.o.batch_expiry_s,
        )
        self.jobs[job.id] = job
        self.stats.batches_created += 1
        job.task = asyncio.get_running_loop().create_task(BatchRun(self, job).run(), name=f"sim-{job.id}")
        return web.json_response(job.as_dict())

    def _job(self, request: web.Request) -> BatchJob | web.Response:
        job = self.jobs.get(request.match_info["id"])
        return job if job is not None else _error(404, f"no such batch: {request.match_info['id']}", param="batch_id")

    async def retrieve(self, request: web.Request) -> web.Response:
        job = self._job(request)
        return job if isinstance(job, web.Response) else web.json_response(job.as_dict())

    async def cancel(self, request: web.Request) -> web.Response:
        job = self._job(request)
        if isinstance(job, web.Response):
            return job
        if job.status in ("validating", "in_progress"):
            job.cancel_requested = True
            job.move("cancelling", self.clock())
            job.wake.set()
        elif job.status != "cancelling":
            return _error(
                400, f"batch {job.id} is {job.status}; only a validating or in_progress batch can be cancelled"
            )
        return web.json_response(job.as_dict())

    async def list_batches(self, request: web.Request) -> web.Response:
        try:
            limit = int(request.query.get("limit", "20"))
        except ValueError:
            return _error(400, "limit must be an integer", param="limit")
        if not 1 <= limit <= 100:
            return _error(400, f"limit must be in [1, 100], got {limit}", param="limit")
        newest = sorted(self.jobs.values(), key=lambda j: j.seq, reverse=True)
        after = request.query.get("after")
        if after:
            if after not in self.jobs:
                return _error(404, f"no such batch: {after}", param="after")
            newest = [j for j in newest if j.seq < self.jobs[after].seq]
        page = newest[:limit]
        return web.json_response(
            {
                "object": "list",
                "data": [j.as_dict() for j in page],
                "first_id": page[0].id if page else None,
                "last_id": page[-1].id if page else None,
                "has_more": len(newest) > limit,
            }
        )
