"""The simulated server (a test double of the OpenAI protocol) over real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from email.utils import parsedate_to_datetime

import pytest

from shp_ray.providers.sim.options import SimOptions
from shp_ray.providers.sim.replies import ReplyOptions, approving_round, writer_draft
from shp_ray.providers.sim.server import SimServer
from shp_ray.providers.tokens import count_tokens

pytestmark = pytest.mark.integration


def _post(base_url: str, body: dict, headers: dict | None = None) -> tuple[int | None, dict, str]:
    req = urllib.request.Request(
        base_url + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()
    except (ConnectionError, urllib.error.URLError) as e:
        return None, {}, repr(e)


def _chat(system: str, user: str, max_tokens: int = 256) -> dict:
    return {
        "model": "sim-1",
        "max_tokens": max_tokens,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
    }


@pytest.fixture(scope="module")
def sim():
    with SimServer() as s:
        yield s


def test_roles_usage_and_determinism(sim):
    body = _chat("You are the Writer.", "Question: Who built the canal?\nRound: 2")
    status, _, text = _post(sim.base_url, body)
    assert status == 200
    reply = json.loads(text)
    content = reply["choices"][0]["message"]["content"]
    assert content == writer_draft(ReplyOptions(), "Who built the canal?", 2)
    usage = reply["usage"]
    assert usage["completion_tokens"] == count_tokens(content)
    assert (
        usage["prompt_tokens"]
        == count_tokens(body["messages"][0]["content"]) + count_tokens(body["messages"][1]["content"]) + 6
    )
    assert _post(sim.base_url, body)[2].count(content) == 1  # same request, same reply

    judge = json.loads(_post(sim.base_url, _chat("You are the judge.", "draft"))[2])
    scores = json.loads(judge["choices"][0]["message"]["content"])
    assert set(scores) == {"faithfulness", "answer_relevancy", "context_precision", "context_recall"}
    assert all(0.0 <= v <= 1.0 for v in scores.values())

    cut = json.loads(_post(sim.base_url, _chat("You are the Writer.", "Round: 1", max_tokens=4))[2])
    assert cut["usage"]["completion_tokens"] == 4 and cut["choices"][0]["finish_reason"] == "length"


def test_writer_drafts_converge_and_critic_approves():
    opts = ReplyOptions(approve_rate=1.0)
    q = "Which river flows through the old capital of the province?"
    drafts = [writer_draft(opts, q, t).split(". ") for t in range(1, 8)]
    changed = [sum(a != b for a, b in zip(x, y, strict=True)) for x, y in zip(drafts, drafts[1:], strict=False)]
    assert changed[0] >= 2 and changed[-1] == 1  # late rounds differ only in the revision number
    assert all(b <= a for a, b in zip(changed, changed[1:], strict=False))
    r = approving_round(opts, q)
    assert r is not None and 2 <= r <= 5
    assert approving_round(ReplyOptions(approve_rate=0.0), q) is None


def test_rate_limit_answers_429_with_headers():
    with SimServer(rpm=60, window_s=2.0, retry_after="http-date") as s:  # 2 requests per 2 s
        codes = [_post(s.base_url, _chat("x", f"hi {i}")) for i in range(3)]
        assert [c[0] for c in codes] == [200, 200, 429]
        headers = codes[2][1]
        assert parsedate_to_datetime(headers["Retry-After"]) is not None
        assert headers["x-ratelimit-remaining-requests"] == "0"
        assert s.stats["http_429"] == 1 and s.stats["ok"] == 2


def test_faults_are_injected_and_retry_can_succeed():
    with SimServer(fault_rate=0.5, seed=3, slow_s=0.05) as s:
        outcomes = [_post(s.base_url, _chat("x", f"q{i}"))[0] for i in range(40)]
        assert s.stats["faults_total"] > 5
        assert any(o is None for o in outcomes) or s.stats["faults"]["drop"] == 0
        assert any(o in (500, 503) for o in outcomes)
        body = _chat("x", "same body")
        assert any(_post(s.base_url, body)[0] == 200 for _ in range(12))  # the n-th arrival differs


def test_auth_and_unknown_model(monkeypatch):
    monkeypatch.setenv("SHP_SIM_TEST_KEY", "sk-sim-secret")
    with SimServer(api_key_env="SHP_SIM_TEST_KEY", models=("sim-1",)) as s:
        assert _post(s.base_url, _chat("x", "y"))[0] == 401
        auth = {"Authorization": "Bearer " + os.environ["SHP_SIM_TEST_KEY"]}
        assert _post(s.base_url, _chat("x", "y"), auth)[0] == 200
        assert _post(s.base_url, {**_chat("x", "y"), "model": "nope"}, auth)[0] == 404


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="faults"):
        SimOptions(faults=("boom",))


def test_fixed_window_and_rejected_requests_that_count():
    # 2 requests per 60 s fixed window: 4 quick requests cannot straddle a boundary in practice
    with SimServer(rpm=2, window_s=60.0, window_kind="fixed", count_rejected=True) as s:
        codes = [_post(s.base_url, _chat("x", f"f{i}"))[0] for i in range(4)]
        assert codes == [200, 200, 429, 429]
        headers = _post(s.base_url, _chat("x", "g"))[1]
        assert 0 < float(headers["retry-after-ms"]) <= 60_000 and headers["x-ratelimit-remaining-requests"] == "0"


def test_slow_faults_hold_then_fail_and_unread_replies_are_counted():
    # every arrival is a slow fault, held 0.2 s, then a 504
    with SimServer(slow_fault_rate=1.0, slow_fault_s=(0.2, 0.2), seed=1) as s:
        status, _, text = _post(s.base_url, _chat("x", "held"))
        assert status == 504 and "slow fault" in text
        assert s.stats["slow_faults"] == 1 and s.stats["ok"] == 0
    with pytest.raises(ValueError, match="slow_fault_s"):
        SimOptions(slow_fault_s=(3.0, 1.0))
    # a reply served after the client gave up is still served (a paid call) and counted as unread
    with SimServer(latency_s=0.5) as s:
        req = urllib.request.Request(
            s.base_url + "/chat/completions",
            data=json.dumps(_chat("x", "gone")).encode(),
            headers={"Content-Type": "application/json"},
        )
        with pytest.raises((TimeoutError, urllib.error.URLError)):
            urllib.request.urlopen(req, timeout=0.1)
        deadline = time.monotonic() + 60  # the reply's own 0.5 s, however long a loaded machine takes to serve it
        while not s.stats["ok"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert s.stats["ok"] == 1 and s.stats["ok_unread"] == 1
