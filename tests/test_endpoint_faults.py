"""Replies and endpoints that must not be believed: a 200 with no text, a server that never answers,
credentials in the URL. Real HTTP on 127.0.0.1 against the simulated server (a protocol double),
the client alone first, then through the preflight and through ``shp-sweep`` (real Ray).
"""

from __future__ import annotations

import asyncio

import pyarrow.compute as pc
import pytest

from shp_ray.generation.guard import GenerationAborted, preflight
from shp_ray.providers.base import ChatRequest, Completion, ProviderError, ProviderSpec
from shp_ray.providers.client import SILENT, OpenAICompatProvider
from shp_ray.providers.retry_policy import Backoff
from shp_ray.providers.sim.server import SimServer
from storage import Store
from tests.test_sweep import shp_sweep

pytestmark = pytest.mark.integration
PASSWORD = "S3CRET-proxy-pw-4711"


def _req(i: int) -> ChatRequest:
    return ChatRequest("sim-1", (("system", "You are the Writer."), ("user", f"Question: q{i}?\nRound: 1")), 48)


def _client(base_url: str, **spec) -> OpenAICompatProvider:
    spec = {"kind": "sim", "base_url": base_url, "model": "sim-1", **spec}
    return OpenAICompatProvider(ProviderSpec(**spec), backoff=Backoff(base_s=0.01, cap_s=0.1), use_ray=False)


async def _complete(client: OpenAICompatProvider, n: int = 1) -> list[Completion | BaseException]:
    async with client:
        return await asyncio.gather(*(client.complete(_req(i)) for i in range(n)), return_exceptions=True)


# --- the client -------------------------------------------------------------------------------------


def test_a_reply_with_no_text_is_a_failed_attempt_in_every_shape():
    with SimServer(fault_rate=1.0, faults=("empty",)) as sim:
        results = asyncio.run(_complete(_client(sim.base_url, max_retries=2), 6))
        stats = sim.stats
    assert all(isinstance(r, ProviderError) for r in results), results
    said = {str(r).split("no text (")[-1] for r in results}
    assert said == {"message.content is null)", "message.content is empty)", "no choices)"}  # the sim's 3 shapes
    assert all("an empty reply after 3 attempt(s)" in str(r) and r.retryable for r in results)
    assert stats["faults"]["empty"] == 6 * 3 and stats["ok"] == 0  # each retried like a 5xx, then given up


def test_replies_with_no_text_now_and_then_are_retried_and_never_returned():
    with SimServer(fault_rate=0.4, faults=("empty",), seed=3) as sim:
        client = _client(sim.base_url, max_retries=10)
        results = asyncio.run(_complete(client, 40))
        stats = sim.stats
    assert all(isinstance(r, Completion) and r.content.strip() for r in results), results
    assert stats["faults"]["empty"] >= 5 and client.stats["fault_empty"] == stats["faults"]["empty"]


def test_a_stalled_endpoint_fails_the_call_within_twice_its_timeout_whatever_the_retry_budget():
    with SimServer(fault_rate=1.0, faults=("stall",)) as sim:
        (err,) = asyncio.run(_complete(_client(sim.base_url, max_retries=30, timeout_s=1.0)))
        requests = sim.stats["requests"]
    assert isinstance(err, ProviderError) and SILENT in str(err) and "2 x provider.timeout_s = 2 s" in str(err)
    # Two attempts of timeout_s each (the server never answers a stalled request): the call's whole cost is
    # bounded by the count of attempts, not by how fast this machine happens to be.
    assert requests == 2  # not 31 timeouts in a row


def test_url_credentials_are_the_endpoints_basic_auth_and_stay_out_of_messages():
    with SimServer(basic_auth=f"proxy-user:{PASSWORD}") as sim:
        with_creds = sim.base_url.replace("http://", f"http://proxy-user:{PASSWORD}@")
        (ok,) = asyncio.run(_complete(_client(with_creds)))
        (refused,) = asyncio.run(_complete(_client(sim.base_url)))  # no credentials: the proxy says 401
        (wrong,) = asyncio.run(_complete(_client(sim.base_url.replace("http://", "http://proxy-user:nope@"))))
    assert isinstance(ok, Completion) and ok.content
    assert isinstance(refused, ProviderError) and refused.status == 401
    assert isinstance(wrong, ProviderError) and wrong.status == 401 and "nope" not in str(wrong)
    assert PASSWORD not in repr(_client(with_creds))


def test_url_credentials_beside_an_api_key_are_refused_before_any_call(monkeypatch):
    monkeypatch.setenv("SHP_TEST_KEY", "sk-test-a-key-0123456789")
    with SimServer() as sim:
        url = sim.base_url.replace("http://", f"http://u:{PASSWORD}@")
        with pytest.raises(GenerationAborted) as err:  # aiohttp used to raise ValueError here: a traceback
            preflight(ProviderSpec(kind="openai", base_url=url, model="m", api_key_env="SHP_TEST_KEY"))
        assert sim.stats["requests"] == 0
    said = str(err.value)
    assert "carries credentials" in said and "SHP_TEST_KEY" in said and "127.0.0.1" in said
    assert PASSWORD not in said and "sk-test" not in said


# --- the preflight ----------------------------------------------------------------------------------


def test_the_preflight_declares_a_stalled_endpoint_dead_within_twice_its_timeout():
    with SimServer(fault_rate=1.0, faults=("stall",)) as sim:
        with pytest.raises(GenerationAborted) as err:
            preflight(ProviderSpec(kind="openai", base_url=sim.base_url, model="m", timeout_s=1.0))
        requests = sim.stats["requests"]
    said = str(err.value)
    assert said.startswith(f"preflight: one test completion against {sim.base_url}") and SILENT in said
    assert requests == 2  # two attempts of timeout_s: 2 x timeout_s, not (max_retries + 1) x timeout_s


# --- shp-sweep, end to end ----------------------------------------------------------------------------


def _sim_job(sim: SimServer, store, ray_address: str, *extra: str):
    return shp_sweep(
        "provider=openai", f"provider.base_url={sim.base_url}", "provider.api_key_env=", "provider.model=sim-model",
        "generation.max_rounds=2", "generation.workers=1", "generation.concurrency=2", "report.enabled=false",
        f"store.path={store}", f"hydra.run.dir={store}-run",  # its run folder beside the store, not ./runs
        f"ray.address={ray_address}", *extra,  # the suite's Ray: what is tested is the endpoint, not Ray's start
    )  # fmt: skip


def _drafts(store) -> list[str]:
    return Store(store).read("rounds", columns=["draft"])["draft"].to_pylist() if Store(store).parts("rounds") else []


def test_a_server_whose_replies_have_no_text_fails_the_run_and_a_rerun_generates_them(tmp_path, ray_address):
    store = tmp_path / "store"
    # faults_after=1: the preflight is answered, then every reply is a 200 with no text
    with SimServer(fault_rate=1.0, faults=("empty",), faults_after=1) as sim:
        out = _sim_job(sim, store, ray_address, "dataset.limit=3", "provider.max_retries=2")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "FAILED" in out.stderr and "an empty reply" in out.stderr and "Traceback" not in out.stderr
    assert "generated now" not in out.stdout  # never "4 generated now, 0 failed"
    assert _drafts(store) == []  # no empty draft kept
    failures = Store(store).read("failures", columns=["stage", "message"])
    writer = [m for s, m in zip(*failures.to_pydict().values(), strict=True) if s == "writer"]
    assert writer and all("no text" in m for m in writer)  # the trajectory's reason, recorded

    # The same command again, against a server whose replies have no text only now and then (one in
    # three): each is retried like a 5xx, and the rerun generates every missing trajectory, all with text.
    with SimServer(fault_rate=0.3, faults=("empty",), seed=5) as flaky:
        again = _sim_job(flaky, store, ray_address, "dataset.limit=3")
        empty = flaky.stats["faults"]["empty"]
    assert again.returncode == 0, again.stdout + again.stderr
    assert "3/3 trajectories, 3 generated now" in again.stdout and ", 0 failed" in again.stdout
    assert empty > 0  # they came, and were retried
    drafts = _drafts(store)
    assert len(drafts) == 3 * 2 and all(d.strip() for d in drafts)
    rounds = Store(store).read("rounds", columns=["scenario_id"])
    assert pc.count_distinct(rounds["scenario_id"]).as_py() == 3


def test_a_server_that_stalls_mid_run_is_declared_dead_with_one_message(tmp_path, ray_address):
    store = tmp_path / "store"
    with SimServer(fault_rate=1.0, faults=("stall",), faults_after=1) as sim:  # the preflight, then silence
        out = _sim_job(sim, store, ray_address, "dataset.limit=4", "provider.timeout_s=1")
        requests = sim.stats["requests"]
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"the endpoint {sim.base_url} stopped answering" in out.stderr and SILENT in out.stderr
    assert "Traceback" not in out.stderr
    # each call in flight (concurrency 2) tried at most twice, and a next trajectory once: not 9 timeouts each
    assert requests <= 1 + 3 * 2, requests
