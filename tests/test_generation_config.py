"""GenerationConfig validation, gen_id, and the progress display's quiet mode."""

from __future__ import annotations

import io
import logging
from dataclasses import replace

import pytest

from shp_ray.generation.config import GenerationConfig
from shp_ray.generation.datasets import load_scenarios
from shp_ray.generation.progress import LOG_EVERY_S, Progress, ProgressState, interactive
from shp_ray.generation.prompts import preset


@pytest.mark.parametrize(
    "bad",
    [{"max_rounds": 0}, {"max_rounds": True}, {"temperature": -0.1}, {"temperature": float("nan")},
     {"judge": "gpt"}, {"concurrency": 0}, {"embedder": ""}, {"seed": -1}, {"flush_every": 1.5}],
)  # fmt: skip
def test_invalid_config_is_refused_with_the_field_named(bad) -> None:
    field = next(iter(bad))
    with pytest.raises(ValueError, match=f"GenerationConfig.{field}"):
        GenerationConfig(**bad)


def test_gen_id_hashes_what_changes_the_drafts_only() -> None:
    base = GenerationConfig()
    gid = base.gen_id("sim", "m")
    for change in ({"max_rounds": 7}, {"temperature": 0.5}, {"seed": 1}, {"prompts": preset("shp-wc-v1")},
                   {"embedder": "fake-hash"}, {"max_tokens": 100}, {"tasks_hash": "f" * 64}):  # fmt: skip
        assert replace(base, **change).gen_id("sim", "m") != gid, change
    assert base.gen_id("sim", "other") != gid and base.gen_id("openai", "m") != gid
    for same in ({"concurrency": 3}, {"workers": 5}, {"judge": "llm"}, {"flush_every": 1}, {"retry_failed": False}):
        assert replace(base, **same).gen_id("sim", "m") == gid, same


def test_a_run_starts_no_more_workers_than_its_trajectories_fill() -> None:
    cfg = GenerationConfig(workers=4, concurrency=8)
    assert cfg.workers_for(None) == 4  # the number unknown: as configured
    assert [cfg.workers_for(n) for n in (0, 1, 8, 9, 16, 17, 32, 1000)] == [1, 1, 1, 2, 2, 3, 4, 4]
    assert cfg.workers_for(3, nodes=3) == 3  # still one per node of a cluster
    assert GenerationConfig(workers=1, concurrency=1).workers_for(50, nodes=2) == 2


def test_progress_without_a_terminal_is_log_lines_at_start_every_interval_and_end(monkeypatch, caplog) -> None:
    monkeypatch.setenv("CI", "true")
    assert not interactive()
    now = [100.0]  # a clock the test moves: no waiting on time
    with caplog.at_level(logging.INFO, logger="shp_ray.progress"), Progress(10, clock=lambda: now[0]) as p:
        p.update(generated=3, failed=1, tokens=1200, retries=2, http_429=1)  # 0 s in: no second line yet
        now[0] += LOG_EVERY_S
        p.update(generated=5, paid_calls=20, paid_tokens=1000)
        assert p._live is None  # nothing drawn
    lines = [r.getMessage() for r in caplog.records if r.name == "shp_ray.progress"]
    assert len(lines) == 3 and lines[0].startswith("generate: 0/10 trajectories"), lines
    assert lines[1].startswith("generate: 6/10 trajectories") and "20 paid calls" in lines[1]
    assert "(100 tok/s paid)" in lines[1] and "1 429s" in lines[1] and "ETA 7s" in lines[1], lines[1]
    assert p.state.done == 6
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="shp_ray.progress"), Progress(10, enabled=False) as p:
        p.update(generated=3)
    assert not caplog.records  # progress=false: neither a line nor a log


def test_progress_line_reports_rate_calls_tokens_retries_and_eta() -> None:
    s = ProgressState(total=110, generated=49, failed=1, skipped=10, tokens=12345, retries=3, http_429=2)
    s.paid_calls, s.paid_tokens = 40, 5000
    s.started -= 10.0  # 10 s in: 5 trajectories/s, 50 left -> ETA 10 s
    line = s.line()
    assert "50/100" in line and "12,345 tokens" in line and "3 retries" in line and "2 429s" in line
    assert "40 paid calls" in line and "(500 tok/s paid)" in line
    assert s.eta_s == pytest.approx(10.0, rel=0.05) and "1 failed" in line


def test_progress_draws_on_a_terminal() -> None:
    from rich.console import Console

    out = io.StringIO()
    with Progress(3, enabled=True, console=Console(file=out, force_terminal=True, color_system=None, width=200)) as p:
        p.update(generated=1, tokens=77, paid_calls=4)
    assert "1/3 trajectories" in out.getvalue() and "77 tokens" in out.getvalue() and "4 paid calls" in out.getvalue()


def test_the_prompt_preset_chooses_the_text_and_an_unknown_one_is_refused() -> None:
    from shp_ray.generation.loop import critic_request, writer_request
    from shp_ray.generation.prompts import PRESETS

    scn = load_scenarios("shp_paper", split="dev")[0]
    assert set(PRESETS) >= {"shp-wc-v1", "shp-wc-v2", "shp-wc-v3"}
    for name in PRESETS:
        ps = preset(name)
        # the role markers the simulated server reads are in every preset
        assert "You are the Writer" in ps.writer_system and "You are the Critic" in ps.critic_system
        if not name.startswith("shp-wc-"):  # the QA presets' texts; code-v1's are tests/test_code_loop.py's
            continue
        cfg = GenerationConfig(prompts=ps)
        w = writer_request(scn, cfg, "m", 2, "draft", "feedback")
        c = critic_request(scn, cfg, "m", 1, "draft")
        assert w.messages[0] == ("system", ps.writer_system) and "Previous draft:\ndraft" in w.messages[1][1]
        w1 = writer_request(scn, cfg, "m", 1, "", "")
        assert "Previous draft:" not in w1.messages[1][1] and scn.question in w1.messages[1][1]
        assert c.messages[0] == ("system", ps.critic_system) and "Draft:\ndraft" in c.messages[1][1]
    assert len({preset(n).writer_system for n in PRESETS}) == len(PRESETS)
    with pytest.raises(ValueError, match="unknown prompt version 'v9'"):
        preset("v9")
