"""The run guard: the breaker's rules, the preflight against real servers, aborted runs keep their work."""

from __future__ import annotations

import asyncio

import pyarrow.parquet as pq
import pytest

from shp_ray.generation.datasets import load_scenarios
from shp_ray.generation.generate import GenerationConfig, RunOptions, generate
from shp_ray.generation.guard import Breaker, GenerationAborted, Outcome, preflight, reason_of
from shp_ray.generation.services import CachedChat
from shp_ray.providers.base import ChatRequest, Completion, ProviderError, ProviderSpec, Usage
from shp_ray.providers.client import SILENT
from shp_ray.providers.sim.server import SimServer
from storage.parts import Store

SPEC = ProviderSpec(kind="openai", base_url="http://127.0.0.1:9/v1", model="m")
DOWN = Outcome("ProviderError: http://127.0.0.1:9/v1: connection (retry budget exhausted): ClientConnectorError")


def test_a_permanent_refusal_trips_at_once_even_after_successes():
    b = Breaker(SPEC)
    b.observe(None, paid_calls=40)
    b.observe(Outcome("ProviderError: HTTP 401: bad key", status=401, retryable=False), paid_calls=40)
    assert b.tripped and "refused the request permanently" in b.tripped and "API key" in b.tripped


def test_an_exhausted_quota_is_permanent_but_a_plain_429_is_not():
    assert Outcome("x", status=429, retryable=False).permanent
    assert not Outcome("x", status=429, retryable=True).permanent
    assert not Outcome("x", status=400, retryable=False).permanent  # one bad request is that scenario's problem


def test_a_failure_before_any_successful_call_trips():
    b = Breaker(SPEC)
    b.observe(DOWN, paid_calls=0)
    assert b.tripped and "no call" in b.tripped and "is up and reachable" in b.tripped


def test_one_bad_request_first_does_not_stop_the_run():
    b = Breaker(SPEC)
    b.observe(Outcome("ProviderError: HTTP 400: context too long", status=400, retryable=False), paid_calls=0)
    assert b.tripped is None


def test_the_same_failure_three_times_in_a_row_trips_but_mixed_outcomes_do_not():
    b = Breaker(SPEC)
    for outcome in (DOWN, None, DOWN, DOWN):
        b.observe(outcome, paid_calls=10)
    assert b.tripped is None  # a stored trajectory in between: the endpoint works
    b.observe(DOWN, paid_calls=10)
    assert b.tripped and "last 3 trajectories" in b.tripped


def test_an_endpoint_that_stopped_answering_trips_at_once_even_after_successes():
    silent = Outcome(f"ProviderError: http://127.0.0.1:9/v1: timeout ({SILENT} for 2 x provider.timeout_s = 240 s)")
    b = Breaker(SPEC)
    b.observe(None, paid_calls=40)
    b.observe(silent, paid_calls=40)  # one is enough: no other trajectory will get a reply either
    assert b.tripped and "http://127.0.0.1:9/v1 stopped answering" in b.tripped and "is up and reachable" in b.tripped


def test_a_dead_server_is_the_reason_given():
    def watchdog():
        raise RuntimeError("the embedded llama.cpp server died: killed by SIGILL")

    b = Breaker(SPEC, watchdog)
    b.observe(DOWN, paid_calls=0)
    assert b.tripped == "the embedded llama.cpp server died: killed by SIGILL"


def test_reasons_compare_equal_across_attempt_counts():
    a = reason_of("http://h/v1: connection after 9 attempt(s) (retry budget exhausted): X")
    b = reason_of("http://h/v1: connection after 3 attempt(s) (retry budget exhausted): X")
    assert a == b and "attempt" not in a


def test_preflight_against_a_closed_port_names_the_endpoint(closed_port):
    spec = ProviderSpec(kind="openai", base_url=f"http://127.0.0.1:{closed_port}/v1", model="m", timeout_s=5)
    with pytest.raises(GenerationAborted, match=r"preflight: .*127\.0\.0\.1.*connection.*is up and reachable"):
        preflight(spec)


def test_preflight_with_a_wrong_key_is_one_401_call(monkeypatch):
    monkeypatch.setenv("SHP_TEST_SERVER_KEY", "right-key-value")
    monkeypatch.setenv("SHP_TEST_CLIENT_KEY", "wrong-key-value")
    with SimServer(api_key_env="SHP_TEST_SERVER_KEY") as sim:
        spec = ProviderSpec(kind="openai", base_url=sim.base_url, model="m", api_key_env="SHP_TEST_CLIENT_KEY")
        with pytest.raises(GenerationAborted, match="HTTP 401") as err:
            preflight(spec)
        assert sim.stats["requests"] == 1  # a permanent refusal is not retried
    assert "wrong-key-value" not in str(err.value) and "SHP_TEST_CLIENT_KEY" in str(err.value)


def test_preflight_of_a_working_endpoint_passes_and_a_missing_model_is_a_404():
    with SimServer(models=("served-model",)) as sim:
        preflight(ProviderSpec(kind="sim", base_url=sim.base_url, model="served-model"))
        with pytest.raises(GenerationAborted, match=r"HTTP 404.*check provider.model"):
            preflight(ProviderSpec(kind="sim", base_url=sim.base_url, model="other-model"))


class _Failing:
    """A provider whose every call fails the same way (what a dead endpoint looks like)."""

    name = "failing"

    def __init__(self, spec: ProviderSpec, status: int | None = None) -> None:
        self.status, self.calls = status, 0

    async def complete(self, request: ChatRequest) -> Completion:
        self.calls += 1
        await asyncio.sleep(0)
        raise ProviderError(
            "http://h/v1: connection after 9 attempt(s): ClientConnectorError", status=self.status, retryable=True
        )


FAILING: list[_Failing] = []


def failing_factory(spec: ProviderSpec) -> _Failing:
    FAILING.append(_Failing(spec))
    return FAILING[-1]


def test_an_aborted_run_stops_early_and_records_why(tmp_path):
    FAILING.clear()
    scenarios = load_scenarios("hotpotqa", split="test", limit=6)
    cfg = GenerationConfig(max_rounds=2, embedder="fake-hash", judge="none", workers=1, concurrency=1)
    spec = ProviderSpec(kind="scripted", base_url="http://h/v1", model="m")
    with pytest.raises(GenerationAborted, match="no call to .* has succeeded") as err:
        opts = RunOptions(
            cache_dir=tmp_path / "cache", backend="local", provider_factory="tests.test_guard:failing_factory",
            progress=False,
        )  # fmt: skip
        generate(scenarios, cfg, Store(tmp_path / "store"), spec, opts)
    assert "Rerun the same command" in str(err.value)
    assert FAILING[0].calls == 1  # one trajectory failed, the other five were never started
    store = Store(tmp_path / "store")
    failures = [r for p in store.parts("failures") for r in pq.read_table(p).to_pylist()]
    stages = sorted(r["stage"] for r in failures)
    assert stages == ["endpoint", "writer"]
    assert "no call" in next(r["message"] for r in failures if r["stage"] == "endpoint")


def test_paid_calls_count_only_calls_that_succeeded():
    class OnceOk:
        name = "once-ok"

        def __init__(self) -> None:
            self.n = 0

        async def complete(self, request: ChatRequest) -> Completion:
            self.n += 1
            if self.n > 1:
                raise ProviderError("down", status=503, retryable=True)
            return Completion("fine", Usage(3, 1))

    chat = CachedChat(OnceOk(), None)
    req = ChatRequest("m", (("user", "hi"),))

    async def go() -> None:
        await chat(req)
        with pytest.raises(ProviderError):
            await chat(req)

    asyncio.run(go())
    assert chat.stats.calls == 2 and chat.stats.paid == 1 and chat.stats.paid_tokens == 4
