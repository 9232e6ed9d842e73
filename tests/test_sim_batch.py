"""The simulated server's Batch API over real HTTP on 127.0.0.1, spoken to by the real openai SDK.

What a provider does and a client must cope with: statuses advance with time, each line's answer
is the live endpoint's, a bad file fails with line-numbered errors, answers come back shuffled,
and batch lines never touch the live rate limits.
"""

from __future__ import annotations

import json
import time
import urllib.request

import pytest
from openai import BadRequestError, OpenAI

from shp_ray.providers.sim.options import SimOptions
from shp_ray.providers.sim.server import SimServer, build_parser, options_from_args
from tests.batch_support import jsonl, lines_for, raw_batch, writer_requests

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sim():
    with SimServer(batch_max_lines=6) as s:
        yield s


def _sdk(sim: SimServer) -> OpenAI:
    return OpenAI(base_url=sim.base_url, api_key="unused", max_retries=0)


def _wait(sdk: OpenAI, batch_id: str, every: float = 0.02, limit_s: float = 60.0) -> tuple[object, list[str]]:
    seen: list[str] = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        batch = sdk.batches.retrieve(batch_id)
        if not seen or seen[-1] != batch.status:
            seen.append(batch.status)
        if batch.status in ("completed", "failed", "expired", "cancelled"):
            return batch, seen
        time.sleep(every)
    raise AssertionError(f"batch {batch_id} still {seen[-1]} after {limit_s} s")


def _live(base_url: str, body: dict) -> dict:
    req = urllib.request.Request(
        base_url + "/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def test_statuses_advance_with_time_and_lines_answer_as_the_live_endpoint():
    with SimServer(batch_delay_s=0.25) as sim:
        sdk = _sdk(sim)
        lines = lines_for(writer_requests(4))
        batch_id = raw_batch(sim.base_url, jsonl(*lines), metadata={"run": "progress"})
        batch, seen = _wait(sdk, batch_id)
        assert seen == ["validating", "in_progress", "finalizing", "completed"]
        assert batch.created_at <= batch.in_progress_at <= batch.finalizing_at <= batch.completed_at
        assert batch.expires_at >= batch.created_at + 86_399 and batch.failed_at is None
        assert (batch.request_counts.total, batch.request_counts.completed, batch.request_counts.failed) == (4, 4, 0)
        assert batch.metadata == {"run": "progress"} and batch.error_file_id is None

        out = [json.loads(x) for x in sdk.files.content(batch.output_file_id).text.splitlines()]
        assert sorted(o["custom_id"] for o in out) == ["r0", "r1", "r2", "r3"]
        by_id = {o["custom_id"]: o for o in out}
        for line in lines:
            got = by_id[line["custom_id"]]
            assert got["id"].startswith("batch_req_") and got["error"] is None
            assert got["response"]["status_code"] == 200 and got["response"]["request_id"].startswith("req_")
            live = _live(sim.base_url, line["body"])
            body = got["response"]["body"]
            assert body["object"] == "chat.completion"
            assert body["choices"] == live["choices"] and body["usage"] == live["usage"]
        assert batch.usage.total_tokens == sum(o["response"]["body"]["usage"]["total_tokens"] for o in out)
        stats = sim.stats["batch"]
        assert stats["batches_final"] == {"completed": 1} and stats["lines_ok"] == 4
        assert stats["ok_by_custom_id"] == {"r0": 1, "r1": 1, "r2": 1, "r3": 1}


def test_output_order_is_a_deterministic_shuffle(sim):
    lines = lines_for(writer_requests(5, topic="harbour"))
    sdk = _sdk(sim)
    orders = []
    for _ in range(2):
        batch, _ = _wait(sdk, raw_batch(sim.base_url, jsonl(*lines)))
        orders.append([json.loads(x)["custom_id"] for x in sdk.files.content(batch.output_file_id).text.splitlines()])
    in_order = [f"r{i}" for i in range(5)]
    assert sorted(orders[0]) == sorted(orders[1]) == in_order
    assert orders[0] != in_order and orders[0] != orders[1]  # shuffled, and per batch: key on custom_id


def test_a_bad_file_fails_with_line_numbered_errors(sim):
    good = lines_for(writer_requests(3))
    wrong_url = {**good[2], "custom_id": "r9", "url": "/v1/embeddings"}
    other_model = {**good[1], "custom_id": "r8", "body": {**good[1]["body"], "model": "sim-2"}}
    content = jsonl(
        good[0], good[1], {**good[2], "custom_id": "r0"}, wrong_url, b'{"custom_id": "r7", "meth', other_model
    )
    batch, seen = _wait(_sdk(sim), raw_batch(sim.base_url, content))
    assert batch.status == "failed" and seen[-1] == "failed" and batch.failed_at is not None
    found = {(e.line, e.code, e.param) for e in batch.errors.data}
    assert found == {
        (3, "duplicate_custom_id", "custom_id"),
        (4, "invalid_url", "url"),
        (5, "invalid_json_line", None),
        (6, "mismatched_model", "body.model"),
    }
    assert all(f"line {e.line}" in e.message for e in batch.errors.data)
    assert batch.output_file_id is None and batch.error_file_id is None and batch.request_counts.total == 0


def test_too_many_lines_fail_the_batch_and_no_line_is_answered(sim):
    before = sim.stats["batch"]["lines_processed"]
    content = jsonl(*lines_for(writer_requests(7), prefix="many"))
    batch, _ = _wait(_sdk(sim), raw_batch(sim.base_url, content))
    assert batch.status == "failed"
    assert [(e.code, e.line) for e in batch.errors.data] == [("too_many_requests_in_file", 7)]
    assert sim.stats["batch"]["lines_processed"] == before


def test_requests_that_cannot_be_taken_are_refused_at_once(sim):
    sdk = _sdk(sim)
    upload = sdk.files.create(file=("a.jsonl", jsonl(*lines_for(writer_requests(1)))), purpose="batch")
    assert sdk.files.retrieve(upload.id).bytes == len(sdk.files.content(upload.id).content)
    for bad in ({"endpoint": "/v1/embeddings"}, {"completion_window": "1h"}, {"metadata": {"k": "v" * 600}}):
        args = {"input_file_id": upload.id, "endpoint": "/v1/chat/completions", "completion_window": "24h", **bad}
        with pytest.raises(BadRequestError):
            sdk.batches.create(**args)
    batch, _ = _wait(sdk, raw_batch(sim.base_url, jsonl(*lines_for(writer_requests(1)))))
    with pytest.raises(BadRequestError, match="completed"):
        sdk.batches.cancel(batch.id)
    assert sdk.files.delete(upload.id).deleted


def test_list_is_newest_first_with_cursor_pages():
    with SimServer() as sim:
        sdk = _sdk(sim)
        ids = [raw_batch(sim.base_url, jsonl(*lines_for(writer_requests(1))), metadata={"n": str(i)}) for i in range(5)]
        page = sdk.batches.list(limit=2)
        assert [b.id for b in page.data] == ids[::-1][:2] and page.has_more
        raw = json.loads(urllib.request.urlopen(f"{sim.base_url}/batches?limit=2&after={ids[3]}").read())
        assert [b["id"] for b in raw["data"]] == [ids[2], ids[1]]
        assert (raw["first_id"], raw["last_id"], raw["has_more"]) == (ids[2], ids[1], True)
        assert [b.id for b in sdk.batches.list(limit=2)] == ids[::-1]  # the SDK follows the pages
        assert sim.stats["batch"]["batches_created"] == 5 and sim.stats["batch"]["files_uploaded"] == 5


def test_batch_lines_never_use_the_live_rate_limit():
    with SimServer(rpm=1, window_s=30.0) as sim:
        batch, _ = _wait(_sdk(sim), raw_batch(sim.base_url, jsonl(*lines_for(writer_requests(30)))))
        assert batch.request_counts.completed == 30
        assert sim.stats["requests"] == 0 and sim.stats["tokens"] == 0  # the live counters saw nothing
        body = lines_for(writer_requests(1))[0]["body"]
        assert _live(sim.base_url, body)["choices"]  # the one live request of the window still fits
        with pytest.raises(urllib.error.HTTPError) as refused:
            _live(sim.base_url, body)
        assert refused.value.code == 429


def test_the_enqueued_token_limit_fails_a_batch_that_does_not_fit():
    lines = lines_for(writer_requests(10))
    # The first batch answers a line per 5 s (50 s in all; cancelled at the end): it is surely still enqueued when
    # the second arrives, however slow the machine (at 5 lines/s it could finish first under load).
    with SimServer(batch_lines_per_s=0.2, batch_enqueued_tokens=250) as sim:
        sdk = _sdk(sim)
        first = raw_batch(sim.base_url, jsonl(*lines))  # 230 prompt tokens: fits
        while sdk.batches.retrieve(first).status == "validating":
            time.sleep(0.01)
        second, _ = _wait(sdk, raw_batch(sim.base_url, jsonl(*lines_for(writer_requests(10), prefix="s"))))
        assert second.status == "failed" and second.errors.data[0].code == "token_limit_exceeded"
        assert sdk.batches.cancel(first).status == "cancelling"


def test_batch_flags_reach_the_options():
    flags = {
        "--batch-delay": "2",
        "--batch-lines-per-s": "50",
        "--batch-expiry": "60",
        "--batch-fault-rate": "1/20",
        "--batch-malformed-rate": "0.01",
        "--batch-max-lines": "100",
        "--batch-max-bytes": "4096",
        "--batch-enqueued-tokens": "9000",
    }
    args = build_parser().parse_args([x for pair in flags.items() for x in pair])
    o = options_from_args(args)
    assert (o.batch_delay_s, o.batch_lines_per_s, o.batch_expiry_s, o.batch_fault_rate) == (2.0, 50.0, 60.0, 0.05)
    assert (o.batch_malformed_rate, o.batch_max_lines, o.batch_max_bytes, o.batch_enqueued_tokens) == (
        0.01,
        100,
        4096,
        9000,
    )
    defaults = options_from_args(build_parser().parse_args([]))
    assert (defaults.batch_max_lines, defaults.batch_max_bytes) == (50_000, 200 * 1024 * 1024)
    with pytest.raises(ValueError, match="batch_fault_rate"):
        SimOptions(batch_fault_rate=1.5)
    assert "--batch-malformed-rate" in build_parser().format_help()
