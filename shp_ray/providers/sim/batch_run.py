"""A simulated batch's life in the background: its phases in time, each line's answer, its result files.

Each of validating, in_progress (before the first line) and finalizing lasts ``batch_delay_s``;
lines are then answered at ``batch_lines_per_s`` (None: as fast as the loop runs), on the
batch's own budget -- never the live route's RPM/TPM windows. A line's answer is the live
route's (:mod:`chat`) for the same body, unless a fault is drawn for it: the draw is a
function of (seed, custom_id, how many times the server has answered that custom_id), so a
line that failed can succeed when it is sent again in a later batch.

A cancel or the expiry ends a phase early: the lines not yet answered go to the error file with
``batch_cancelled`` / ``batch_expired`` (counted failed), the answered ones stay where they are.
Output lines are written in a deterministic shuffle, so a client has to match them by custom_id.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from typing import TYPE_CHECKING, Any

from shp_ray.providers.sim.batch_input import InputLine, batch_error, read_input
from shp_ray.providers.sim.chat import BadChat, chat_completion, error_body, parse_chat
from shp_ray.providers.sim.faults import unit

if TYPE_CHECKING:  # the store that runs this batch; it imports this module to start it
    from shp_ray.providers.sim.batch import SimBatch
    from shp_ray.providers.sim.batch_state import BatchJob

YIELD_EVERY = 64  # lines answered between two yields to the loop, so the server stays responsive
UNANSWERED = {
    "cancel": ("batch_cancelled", "This request was not executed: the batch was cancelled first."),
    "expire": ("batch_expired", "This request could not be executed before the completion window expired."),
}


def _hex(*parts: object) -> str:
    return hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()


async def _hold(job: BatchJob, seconds: float, clock: Any) -> str | None:
    """Wait ``seconds``; "cancel" or "expire" if that comes first (checked before waiting, too)."""
    end = clock() + seconds
    while True:
        now = clock()
        if job.cancel_requested:
            return "cancel"
        if now >= job.deadline:
            return "expire"
        if now >= end:
            return None
        job.wake.clear()
        with contextlib.suppress(TimeoutError):  # the time is up; the loop looks at why
            await asyncio.wait_for(job.wake.wait(), min(end, job.deadline) - now)


def _prompt_tokens(item: InputLine) -> int:
    try:
        return parse_chat(item.body).prompt_tokens
    except BadChat:
        return 0


class BatchRun:
    """One batch from validation to its terminal status (``await BatchRun(sim, job).run()``)."""

    def __init__(self, sim: SimBatch, job: BatchJob) -> None:
        self.sim, self.job, self.o = sim, job, sim.o
        self.source = sim.files[job.input_file_id].content  # read now: deleting the file later changes nothing
        self.outputs: list[tuple[str, bytes]] = []  # (custom_id, line) of the output file
        self.errors: list[tuple[str, bytes]] = []  # ... of the error file

    async def run(self) -> None:
        job, clock = self.job, self.sim.clock
        items, problems = read_input(self.source, endpoint=job.endpoint, max_lines=self.o.batch_max_lines)
        stop = await _hold(job, self.o.batch_delay_s, clock)  # validating
        if stop is None and problems:
            job.errors = problems
            return self._finish("failed")
        if stop is None:
            tokens = sum(_prompt_tokens(i) for i in items)
            limit = self.o.batch_enqueued_tokens
            if limit is not None and self.sim.enqueued_tokens(items[0].body["model"]) + tokens > limit:
                msg = f"enqueued token limit reached for {items[0].body['model']}: {limit} tokens (simulated)"
                job.errors = [batch_error("token_limit_exceeded", msg)]
                return self._finish("failed")
            job.model, job.total, job.enqueued_tokens = str(items[0].body["model"]), len(items), tokens
            job.move("in_progress", clock())
            stop = await _hold(job, self.o.batch_delay_s, clock)
        elif not problems:  # cancelled or expired while validating: the lines were never started
            job.total = len(items)
        else:
            items = []
        done = 0
        if stop is None:
            pace = 1.0 / self.o.batch_lines_per_s if self.o.batch_lines_per_s else 0.0
            for item in items:
                if pace:
                    stop = await _hold(job, pace, clock)
                elif done % YIELD_EVERY == 0:
                    await asyncio.sleep(0)
                    stop = await _hold(job, 0.0, clock)
                if stop is not None:
                    break
                self._answer(item)
                done += 1
        if stop is not None:
            for item in items[done:]:
                self._unanswered(item, stop)
        if stop == "expire":
            return self._finish("expired")
        if stop == "cancel":
            await asyncio.sleep(self.o.batch_delay_s)  # cancelling takes a while, as it does for real
            return self._finish("cancelled")
        job.move("finalizing", clock())
        await asyncio.sleep(self.o.batch_delay_s)
        self._finish("completed")

    def _answer(self, item: InputLine) -> None:
        sim, job, o = self.sim, self.job, self.o
        cid = item.custom_id
        nth = sim.seen[cid]
        sim.seen[cid] += 1
        sim.stats.lines_processed += 1
        ids = {"id": f"batch_req_{_hex(job.id, cid)[:24]}", "custom_id": cid}
        request_id = f"req_{_hex(job.id, cid, 'request')[:24]}"
        try:
            chat = parse_chat(item.body, o.models)
        except BadChat as exc:
            return self._failed(ids, request_id, exc.status, error_body(exc.status, str(exc), exc.kind))
        if o.batch_fault_rate > 0 and unit(o.seed, "batch-fault?", cid, nth) < o.batch_fault_rate:
            return self._failed(ids, request_id, 500, error_body(500, "injected fault (simulated)", "server_error"))
        reply_id = f"chatcmpl-sim-{_hex(json.dumps(item.body, sort_keys=True))[:16]}-b{nth}"
        body = chat_completion(sim.replies, chat, reply_id=reply_id, created=int(sim.clock()))
        usage = body["usage"]
        job.completed += 1
        job.prompt_tokens += usage["prompt_tokens"]
        job.completion_tokens += usage["completion_tokens"]
        sim.stats.lines_ok += 1
        sim.stats.tokens += usage["total_tokens"]
        sim.stats.ok_by_custom_id[cid] += 1
        line = _encode({**ids, "response": {"status_code": 200, "request_id": request_id, "body": body}, "error": None})
        if o.batch_malformed_rate > 0 and unit(o.seed, "batch-malformed?", cid, nth) < o.batch_malformed_rate:
            sim.stats.malformed_lines += 1
            line = line[: len(line) // 2] + b"\n"  # half a JSON object is never valid JSON
        self.outputs.append((cid, line))

    def _failed(self, ids: dict[str, str], request_id: str, status: int, body: dict[str, Any]) -> None:
        self.job.failed += 1
        self.sim.stats.lines_failed += 1
        response = {"status_code": status, "request_id": request_id, "body": body}
        self.errors.append((ids["custom_id"], _encode({**ids, "response": response, "error": None})))

    def _unanswered(self, item: InputLine, why: str) -> None:
        code, message = UNANSWERED[why]
        self.job.failed += 1
        if why == "expire":
            self.sim.stats.lines_expired += 1
        else:
            self.sim.stats.lines_cancelled += 1
        ids = {"id": f"batch_req_{_hex(self.job.id, item.custom_id)[:24]}", "custom_id": item.custom_id}
        self.errors.append(
            (item.custom_id, _encode({**ids, "response": None, "error": {"code": code, "message": message}}))
        )

    def _finish(self, status: str) -> None:
        job, sim = self.job, self.sim
        if self.outputs:
            job.output_file_id = sim.add_file(f"{job.id}_output.jsonl", "batch_output", self._file(self.outputs)).id
        if self.errors:
            job.error_file_id = sim.add_file(f"{job.id}_error.jsonl", "batch_output", self._file(self.errors)).id
        job.enqueued_tokens = 0
        job.move(status, sim.clock())
        sim.stats.batches_final[status] += 1

    def _file(self, lines: list[tuple[str, bytes]]) -> bytes:
        """The lines in a deterministic shuffle: real providers promise no order, so clients must key on custom_id."""
        order = sorted(lines, key=lambda pair: _hex(self.o.seed, "batch-order", self.job.id, pair[0]))
        return b"".join(line for _, line in order)


def _encode(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
