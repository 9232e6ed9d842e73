"""The shipped store of the run where revising can matter (results/humaneval-revise/store: Qwen2.5-Coder-1.5B on
HumanEval with public and private tests, a sampling Writer, 2 epochs, with feedback and the resampling control): it
is what its README says, and RESULTS.md's section is exactly what it replays."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from shp_ray.providers.local_models import MODELS
from storage.parts import Store
from sweeps.revise_results import HEADING, render
from tests.results_support import results_section

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[1]
STORE = "results/humaneval-revise/store"  # relative, as RESULTS.md names it
MODEL = "qwen2.5-coder-1.5b-instruct"


def _trajectories() -> dict[str, set[str]]:
    held: dict[str, set[str]] = {}
    for r in Store(str(ROOT / STORE)).read("rounds", columns=["gen_id", "scenario_id"]).to_pylist():
        held.setdefault(r["gen_id"], set()).add(r["scenario_id"])
    return held


def test_two_generations_one_with_feedback_one_resampling_every_round_scored() -> None:
    store = Store(str(ROOT / STORE))
    gens = {json.loads(g["config_json"])["generation"]["critic"]: g for g in store.read("generations").to_pylist()}
    assert set(gens) == {"tests", "none"}
    for gen in gens.values():
        config = json.loads(gen["config_json"])
        assert gen["model"] == MODEL and gen["max_rounds"] == 4 and gen["temperature"] == 0.7
        assert config["model_sha256"] == MODELS[MODEL].sha256  # the GGUF that wrote every draft
        assert config["generation"]["epochs"] == 2 and config["gen_id_parts"]["seeding"] == "round"
        assert config["gen_id_parts"]["tests"] == "split"
    rounds = store.read("rounds", columns=["gen_id", "scenario_id", "round"]).to_pylist()
    keys = {(r["gen_id"], r["scenario_id"], r["round"]) for r in rounds}
    assert len(keys) == len(rounds)  # nothing stored twice
    for gen_id, ids in _trajectories().items():  # whole trajectories only: every one has its 4 rounds
        assert {(gen_id, s, t) for s in ids for t in range(1, 5)} <= keys
        assert len([k for k in keys if k[0] == gen_id]) == 4 * len(ids)
    hidden = {(s["gen_id"], s["scenario_id"], s["round"]) for s in store.read("scores").to_pylist()
              if s["score"] == "hidden_pass"}  # fmt: skip
    assert hidden == keys


def test_the_readme_states_the_counts_the_store_holds() -> None:
    readme = (ROOT / STORE).parent.joinpath("README.md").read_text()
    gens = {g["gen_id"]: json.loads(g["config_json"])["generation"]["critic"]
            for g in Store(str(ROOT / STORE)).read("generations").to_pylist()}  # fmt: skip
    held = {gens[g]: len(ids) for g, ids in _trajectories().items()}
    said = {
        m["critic"]: int(m["n"])
        for m in re.finditer(r"\*\*(?P<n>\d+) trajectories with critic `(?P<critic>\w+)`", readme)
    }
    assert said == held


def test_results_md_section_is_exactly_what_the_store_replays(tmp_path, monkeypatch) -> None:
    shutil.copytree(ROOT / STORE, tmp_path / STORE)  # a read, but on a copy: the checkout stays as it was
    monkeypatch.chdir(tmp_path)
    text = (ROOT / "RESULTS.md").read_text()
    assert text.count(HEADING) == 1
    assert results_section(text, HEADING) == render(Store(STORE))
