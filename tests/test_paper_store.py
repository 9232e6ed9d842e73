"""The shipped store of the paper's run (results/paper-local/store, real drafts of a real local model on the
paper's frozen 80-question split): it is what its README line says, RESULTS.md is exactly what it replays,
and the ablation grid reruns on it with zero generation calls."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from analysis import connect
from analysis.sql.rows import fetch_dicts
from shp_ray.providers.local_models import MODELS
from storage.parts import Store
from sweeps.code_results import HEADING as CODE_HEADING
from sweeps.paper_results import paper_job, render

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[1]
STORE = "results/paper-local/store"  # relative, as RESULTS.md names it
MODEL = "qwen2.5-coder-1.5b-instruct"


@pytest.fixture(scope="module")
def store() -> str:
    return str(ROOT / STORE)


def test_the_store_holds_the_papers_split_generated_by_the_local_model(store) -> None:
    scenarios = Store(store).read("scenarios").to_pylist()
    assert sorted(s["split"] for s in scenarios).count("dev") == 20
    assert sorted(s["split"] for s in scenarios).count("test") == 60
    (gen,) = Store(store).read("generations").to_pylist()
    assert gen["model"] == MODEL and gen["max_rounds"] == 6 and gen["temperature"] == 0.7
    assert MODELS[MODEL].sha256 in gen["config_json"]  # the GGUF that wrote every draft
    rounds = Store(store).read("rounds").select(["scenario_id", "round"]).to_pylist()
    assert len({(r["scenario_id"], r["round"]) for r in rounds}) == len(rounds) == 80 * 6
    judges = {}
    for j in Store(store).read("judgments").select(["judge", "scenario_id", "draft_hash", "error"]).to_pylist():
        judges.setdefault(j["judge"].split(" ")[0], []).append(j)
    assert set(judges) == {"lexical-v1", f"llm:{MODEL}"}, set(judges)


def test_every_draft_has_both_judges_and_the_answer_metrics(store) -> None:
    con = connect(store, judge=f"llm:{MODEL}")
    try:
        (n, em, f1, line) = con.execute(
            "SELECT count(*), count(answer_em), count(answer_f1), count(has_answer_line) FROM rounds"
        ).fetchone()
        assert n == em == f1 == line == 480
        dyn = fetch_dicts(con, "SELECT * FROM dynamics")
        assert len(dyn) == 1 and dyn[0]["trajectories"] == 80
        assert dyn[0]["share_revised"] > 0.5  # most trajectories revise after round 1: evidence, not frozen
    finally:
        con.close()


def test_results_md_is_exactly_what_the_store_replays(store, tmp_path, monkeypatch) -> None:
    # On a copy at the same relative path: the gain model is refitted per judge and its artefact rewritten.
    shutil.copytree(store, tmp_path / STORE)
    monkeypatch.chdir(tmp_path)
    text = (ROOT / "RESULTS.md").read_text()  # the paper's run, then the code run's section (test_humaneval_store)
    assert text[: text.index(CODE_HEADING)] == render(STORE) + "\n"


def test_the_ablation_grid_reruns_on_it_without_generating(store, tmp_path) -> None:
    copy = tmp_path / "store"
    shutil.copytree(store, copy)  # the jobs write their results rows and manifests: not into the repository
    job = paper_job(str(copy))
    assert job.provider.model == MODEL
    out = subprocess.run(
        [str(Path(sys.executable).parent / "shp-sweep"), "-m", "+sweep=[paper,ablation7]", f"store.path={copy}",
         f"hydra.sweep.dir={tmp_path / 'runs'}", "report.enabled=false"],
        capture_output=True, text=True, timeout=900, cwd=ROOT, env={**os.environ, "CI": "true"},
    )  # fmt: skip
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert out.stdout.count("60/60 trajectories, 0 generated now (0 paid calls), 0 failed") == 7, out.stdout[-3000:]
