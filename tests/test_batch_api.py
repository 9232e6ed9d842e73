"""The Batch API client (shp_ray.providers.batch_api) against the simulated server over real HTTP.

It must give the same Completions a live run gives, recover what a batch lost (failed lines,
expiry, cancel, malformed lines) by resubmitting only those, never pay for a request twice,
adopt a batch whose creation reply was lost, and never show the key.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from shp_ray.providers.base import ChatRequest, ProviderError, ProviderSpec
from shp_ray.providers.batch_api import BatchAPI, BatchState
from shp_ray.providers.batch_files import BatchLimits, encode_file, encode_line, request_line, split_lines
from shp_ray.providers.batch_results import read_results
from shp_ray.providers.client import OpenAICompatProvider
from shp_ray.providers.sim.batch import SimBatch
from shp_ray.providers.sim.server import SimServer
from tests.batch_support import lines_for, writer_requests

pytestmark = pytest.mark.integration
POLL = 0.02
T = TypeVar("T")


def with_api(base_url: str, use: Callable[[BatchAPI], Awaitable[T]], **spec: Any) -> T:
    """Run ``use(api)`` on a fresh loop with a BatchAPI for ``base_url`` (closed afterwards)."""

    async def go() -> T:
        async with BatchAPI(ProviderSpec(base_url=base_url, **spec)) as api:
            return await use(api)

    return asyncio.run(go())


async def _run(api: BatchAPI, lines: list[dict], **meta: str) -> tuple[BatchState, object]:
    state = await api.wait(await api.submit(lines, metadata=meta or None), poll_s=POLL, timeout_s=20)
    return state, await api.results(state)


def test_batch_completions_equal_live_completions():
    requests = writer_requests(6) + [ChatRequest("sim-1", (("system", "You are the Critic."), ("user", "Round: 2")))]
    with SimServer() as sim:
        spec = ProviderSpec(base_url=sim.base_url, model="sim-1")

        async def live() -> list:
            async with OpenAICompatProvider(spec, use_ray=False, deadline=False) as provider:
                return [await provider.complete(r) for r in requests]

        live_done = asyncio.run(live())
        lines = lines_for(requests)
        assert all(line["body"] == r.openai_body() for line, r in zip(lines, requests, strict=True))
        state, results = with_api(sim.base_url, lambda api: _run(api, lines))
    assert state.status == "completed" and state.counts.completed == len(requests)
    assert not results.errors and not results.malformed
    for i, want in enumerate(live_done):
        got = results.completions[f"r{i}"]
        assert (got.content, got.usage, got.model) == (want.content, want.usage, want.model)


def test_failed_lines_resubmitted_alone_succeed_and_nothing_is_paid_twice():
    requests = writer_requests(20)
    lines = lines_for(requests)
    with SimServer(batch_fault_rate=0.4) as sim:

        async def rounds(api: BatchAPI) -> tuple[list[int], dict]:
            todo, done, failed_per_round = list(lines), {}, []
            while todo:
                state, results = await _run(api, todo)
                failed_per_round.append(len(results.errors))
                assert state.counts.failed == len(results.errors)
                assert all(e.status == 500 and e.retryable for e in results.errors.values())
                done.update(results.completions)
                todo = [line for line in todo if line["custom_id"] in results.errors]
                assert len(failed_per_round) < 8, "a retried line kept failing"
            return failed_per_round, done

        failed, done = with_api(sim.base_url, rounds)
        stats = sim.stats["batch"]
    assert failed[0] > 0 and failed[-1] == 0
    assert sorted(done) == sorted(line["custom_id"] for line in lines)
    assert stats["ok_by_custom_id"] == {line["custom_id"]: 1 for line in lines}  # each answer paid once
    assert stats["lines_processed"] == 20 + sum(failed) and stats["lines_failed"] == sum(failed)


def test_an_expired_batch_keeps_its_answers_and_reports_the_rest_as_batch_expired():
    lines = lines_for(writer_requests(40))
    with SimServer(batch_delay_s=0.1, batch_lines_per_s=25.0, batch_expiry_s=0.8) as sim:
        state, results = with_api(sim.base_url, lambda api: _run(api, lines))
        stats = sim.stats["batch"]
    assert state.status == "expired" and state.terminal
    assert 0 < state.counts.completed < 40 and state.counts.completed + state.counts.failed == 40
    assert len(results.completions) == state.counts.completed
    assert {e.code for e in results.errors.values()} == {"batch_expired"}
    assert all(e.retryable and e.status is None for e in results.errors.values())
    assert stats["lines_expired"] == state.counts.failed and stats["batches_final"] == {"expired": 1}


def test_cancel_keeps_the_partial_results():
    lines = lines_for(writer_requests(30))
    with SimServer(batch_delay_s=0.05, batch_lines_per_s=20.0) as sim:

        async def cancel_midway(api: BatchAPI) -> tuple[BatchState, BatchState, object, str]:
            batch_id = await api.submit(lines)
            while (await api.retrieve(batch_id)).counts.completed < 3:
                await asyncio.sleep(POLL)
            cancelling = await api.cancel(batch_id)
            state = await api.wait(batch_id, poll_s=POLL, timeout_s=10)
            try:
                await api.cancel(batch_id)
                again = ""
            except ProviderError as exc:
                again = f"{exc.status} {exc.retryable}"
            return cancelling, state, await api.results(state), again

        cancelling, state, results, again = with_api(sim.base_url, cancel_midway)
    assert cancelling.status == "cancelling" and state.status == "cancelled"
    assert 3 <= len(results.completions) < 30
    assert set(results.completions) | set(results.errors) == {line["custom_id"] for line in lines}
    assert {e.code for e in results.errors.values()} == {"batch_cancelled"}
    assert again == "400 False"  # a finished batch cannot be cancelled, and retrying will not help


def test_malformed_output_lines_are_counted_and_the_rest_is_read():
    lines = lines_for(writer_requests(20))
    with SimServer(batch_malformed_rate=0.3) as sim:
        state, results = with_api(sim.base_url, lambda api: _run(api, lines))
        broken = sim.stats["batch"]["malformed_lines"]
    assert broken > 0 and results.malformed_count == broken
    assert all(which == "output" and n >= 1 for which, n in results.malformed)
    assert len(results.completions) == 20 - broken and not results.errors
    assert len(results.missing(line["custom_id"] for line in lines)) == broken


def test_find_adopts_the_batch_by_its_metadata():
    with SimServer() as sim:

        async def make_and_find(api: BatchAPI) -> tuple[list[str], BatchState | None, BatchState | None]:
            ids = [await api.submit(lines_for(writer_requests(1)), metadata={"run": f"run-{i}"}) for i in range(3)]
            return ids, await api.find("run", "run-1"), await api.find("run", "nope")

        ids, found, none = with_api(sim.base_url, make_and_find)
    assert found is not None and found.id == ids[1] and found.metadata == {"run": "run-1"}
    assert none is None


def test_a_lost_create_reply_adopts_the_batch_instead_of_making_a_second(monkeypatch):
    original, calls = SimBatch.create, []

    async def lose_first_reply(self, request):
        response = await original(self, request)
        calls.append(response)
        if len(calls) == 1 and request.transport is not None:
            request.transport.abort()  # the batch exists; the client never hears of it
        return response

    looked, made_from = [], BatchAPI._made_from

    async def look(self, input_file_id):
        looked.append(await made_from(self, input_file_id))
        return looked[-1]

    monkeypatch.setattr(SimBatch, "create", lose_first_reply)
    monkeypatch.setattr(BatchAPI, "_made_from", look)
    with SimServer() as sim:
        batch_id = with_api(sim.base_url, lambda api: api.submit(lines_for(writer_requests(2))))
        assert sim.stats["batch"]["batches_created"] == 1 and list(sim.sim.batch.jobs) == [batch_id]
    assert len(calls) == 1 and [s.id for s in looked] == [batch_id]  # the reply was lost, the batch found


def test_http_faults_are_provider_errors_without_the_key(monkeypatch):
    secret = "sk-test-Secret0123456789abcdef"
    monkeypatch.setenv("SHP_TEST_SERVER_KEY", "sk-test-the-right-one-000000")
    monkeypatch.setenv("SHP_TEST_BATCH_KEY", secret)
    with SimServer(api_key_env="SHP_TEST_SERVER_KEY", batch_max_bytes=600) as sim:
        line = lines_for(writer_requests(1))

        with pytest.raises(ProviderError) as refused:
            with_api(sim.base_url, lambda api: api.submit(line), api_key_env="SHP_TEST_BATCH_KEY")
        assert refused.value.status == 401 and not refused.value.retryable
        monkeypatch.setenv("SHP_TEST_BATCH_KEY", "sk-test-the-right-one-000000")
        big = lines_for(writer_requests(8))
        with pytest.raises(ProviderError) as too_big:
            with_api(sim.base_url, lambda api: api.submit(big), api_key_env="SHP_TEST_BATCH_KEY")
        assert too_big.value.status == 413 and not too_big.value.retryable
        spec = {"api_key_env": "SHP_TEST_BATCH_KEY"}
        bad_meta = lines_for(writer_requests(1), prefix="m")
        with pytest.raises(ProviderError) as refused_create:
            with_api(sim.base_url, lambda api: api.submit(bad_meta, metadata={"k": "v" * 600}), **spec)
        assert refused_create.value.status == 400 and "metadata" in str(refused_create.value)
        assert sim.sim.batch.files == {} and sim.stats["batch"]["batches_created"] == 0  # the upload went too
    for exc in (refused.value, too_big.value):
        text = f"{exc} {exc!r} {exc.args}"
        assert secret not in text and "the-right-one" not in text
        assert exc.__cause__ is None and exc.__context__ is None  # no SDK error (with its request) chained
    monkeypatch.delenv("SHP_TEST_BATCH_KEY")
    with pytest.raises(ProviderError, match="SHP_TEST_BATCH_KEY is not set"):
        BatchAPI(ProviderSpec(base_url="http://127.0.0.1:9/v1", api_key_env="SHP_TEST_BATCH_KEY"))


def test_an_echoed_key_is_redacted(monkeypatch, closed_port):
    from aiohttp import web

    secret = "sk-test-Echoed0123456789abcdef"
    monkeypatch.setenv("SHP_TEST_BATCH_KEY", secret)

    async def echo(request: web.Request) -> web.Response:  # as a provider names the key it refuses
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        body = {"error": {"message": f"Incorrect API key provided: {token}", "type": "invalid_request_error"}}
        return web.json_response(body, status=401)

    sim = SimServer()
    sim.sim.app.router.add_post("/echo/v1/files", echo)
    with sim, pytest.raises(ProviderError) as refused:
        with_api(
            f"{sim.base_url[:-3]}/echo/v1",
            lambda api: api.submit(lines_for(writer_requests(1))),
            api_key_env="SHP_TEST_BATCH_KEY",
        )
    assert "Incorrect API key provided: ***" in str(refused.value) and secret not in str(refused.value)
    api = BatchAPI(ProviderSpec(base_url=f"http://127.0.0.1:{closed_port}/v1", api_key_env="SHP_TEST_BATCH_KEY"))
    assert secret not in repr(api)
    with pytest.raises(ProviderError) as unreachable:
        asyncio.run(BatchAPI(ProviderSpec(base_url=f"http://127.0.0.1:{closed_port}/v1", max_retries=0)).retrieve("b"))
    assert unreachable.value.retryable and unreachable.value.status is None


def test_split_lines_respects_lines_bytes_and_models():
    lines = lines_for(writer_requests(10))
    assert [len(f) for f in split_lines(lines, BatchLimits(max_lines=4))] == [4, 4, 2]
    size = len(encode_line(lines[0]))
    limits = BatchLimits(max_bytes=2 * size + 5)
    files = split_lines(lines, limits)
    assert all(len(encode_file(f)) <= limits.max_bytes for f in files) and sum(map(len, files)) == 10
    assert [line["custom_id"] for f in files for line in f] == [line["custom_id"] for line in lines]
    other = request_line("x0", ChatRequest("sim-2", (("user", "hi"),)))
    assert [{line["body"]["model"] for line in f} for f in split_lines([lines[0], other, lines[1]])] == [
        {"sim-1"},
        {"sim-2"},
    ]
    with pytest.raises(ValueError, match="twice"):
        split_lines([lines[0], lines[0]])
    with pytest.raises(ValueError, match="bytes"):
        split_lines(lines, BatchLimits(max_bytes=size - 1))
    with pytest.raises(ValueError, match="no model"):
        request_line("x1", ChatRequest("", (("user", "hi"),)))
    assert request_line("x2", ChatRequest("", (("user", "hi"),)), default_model="m")["body"]["model"] == "m"


def test_read_results_never_raises_on_a_bad_line():
    ok = {
        "custom_id": "a",
        "response": {"status_code": 200, "body": {"model": "m", "choices": [{"message": {"content": "hi"}}],
                                                  "usage": {"prompt_tokens": 3, "completion_tokens": 1}}},
    }  # fmt: skip
    no_usage = {"custom_id": "b", "response": {"status_code": 200, "body": {"choices": []}}}
    refused = {"custom_id": "c", "response": {"status_code": 400, "body": {"error": {"message": "bad", "code": "x"}}}}
    output = b"\n".join([encode_line(ok).strip(), b"not json", b'["a list"]', encode_line(no_usage).strip()])
    results = read_results(output, encode_line(refused) + b'{"custom_id": "d", "res')
    assert results.completions["a"].content == "hi" and results.completions["a"].usage.total_tokens == 4
    assert results.errors["b"].code == "malformed_body" and results.errors["b"].retryable
    assert (results.errors["c"].status, results.errors["c"].retryable) == (400, False)
    assert results.malformed == (("output", 2), ("output", 3), ("error", 2))
    assert results.retryable() == ["b"] and results.missing(["a", "b", "c", "d"]) == ["d"]
