"""Prompts as config: the shipped presets render today's bytes, keep their gen_ids; a user's own preset."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import numpy as np
import pytest
from hydra import compose, initialize_config_module

import conf.schema  # noqa: F401
from conf.resolve import ConfigError, to_job
from shp_ray.generation.config import GenerationConfig
from shp_ray.generation.datasets import load_scenarios
from shp_ray.generation.prompts import PromptError, critic_messages, from_mapping, preset, writer_messages
from shp_ray.policy.cascade import approved
from shp_ray.policy.round_signals import RoundColumns, trajectory_signals

# sha256 of the Writer and Critic messages of every shp_paper scenario (both splits, rounds 1-3, empty and
# given drafts / feedback), rendered by the Python prompt sets before they became YAML presets
# (shp_ray/generation/prompts.py at 202d22e): the presets must send byte-identical requests.
RENDERED = {
    "shp-wc-v1": "f500db4bbfa4b4be0ec5383213f9db8f73ed42b97bae49c988e3814eee9aa667",
    "shp-wc-v2": "1b400c49a4650e7e257124e446941946825d49cb1097ed45b02ecaf2c1f1089c",
    "shp-wc-v3": "dc811b6f766f99d5d9e27c608acc422ed8ee41ac275db01cbd9ac92ac6ad7d2d",
}
# GenerationConfig(prompt_version=v).gen_id("sim", "sim-model") before presets: the stores keyed by them.
GEN_IDS = {
    "shp-wc-v1": "a8d0e1f7831bc1edfb70f012cfba8c26c779eef9125e116303ba2992394b8def",
    "shp-wc-v2": "8ea3db3e3d426390e9185a4d2b45fca9c064101939072bbb342d9c68ebc9c28d",
    "shp-wc-v3": "9ed26ad1393ffbc176f5b68e1531cfcb7bbef69f443c1174b6a124abcec70bdb",
}


@pytest.fixture(scope="module")
def hydra_ctx():
    with initialize_config_module(config_module="conf", version_base="1.3"):
        yield


def rendering(name: str) -> str:
    scenarios = load_scenarios("shp_paper")
    assert len(scenarios) == 80
    out = []
    for s in scenarios:
        for t in (1, 2, 3):
            for prev, fb in (("", ""), (f"Draft {t} of {s.scenario_id}.\nAnswer: x", "PROBLEMS: {braces} and [1]")):
                out.append(writer_messages(s.question, s.contexts, t, prev, fb, preset(name)))
            for d in ("", f"Draft {t}.\nAnswer: y {{z}}"):
                out.append(critic_messages(s.question, s.contexts, t, d, preset(name)))
    return hashlib.sha256(json.dumps(out).encode()).hexdigest()


@pytest.mark.parametrize("name", sorted(RENDERED))
def test_shipped_presets_render_the_80_paper_scenarios_byte_identically(name):
    assert rendering(name) == RENDERED[name]


@pytest.mark.parametrize("name", sorted(GEN_IDS))
def test_shipped_presets_keep_their_gen_ids_and_an_edit_is_a_new_generation(name):
    cfg = GenerationConfig(prompts=preset(name))
    assert cfg.gen_id("sim", "sim-model") == GEN_IDS[name]
    assert cfg.gen_id_parts("sim", "sim-model")["prompt_version"] == name
    edited = replace(cfg, prompts=replace(preset(name), critic_user=preset(name).critic_user + "\nBe brief."))
    renamed = replace(cfg, prompts=replace(preset(name), name="mine"))
    marker = replace(cfg, prompts=replace(preset(name), approval="LGTM"))
    ids = {c.gen_id("sim", "sim-model") for c in (cfg, edited, renamed, marker)}
    assert len(ids) == 4
    assert edited.gen_id_parts("sim", "sim-model")["prompts"] == edited.prompts.digest


def test_templates_render_named_fields_metadata_and_literal_braces():
    ps = from_mapping(
        {
            "writer": {
                "system": "You are the Writer ({topic}).",
                "user": "Q: {question} {{x}}",
                "revise": "{draft}|{feedback}",
            },
            "critic": {"system": "You are the Critic.", "user": "Round: {round}\n{contexts}\n{draft}"},
        }
    )
    assert ps.name.startswith("custom-") and ps.approval == "APPROVED"  # no name: named by the templates' hash
    meta = {"topic": "maths", "level": 3}
    assert writer_messages("q?", ["c"], 1, "", "", ps, meta) == (
        ("system", "You are the Writer (maths)."), ("user", "Q: q? {x}"),
    )  # fmt: skip
    assert writer_messages("q?", [], 2, "", "", ps, meta)[1][1] == "(empty)|(none)"
    assert critic_messages("q?", ["c"], 2, "d", ps)[1][1] == "Round: 2\n[1] c\nd"


@pytest.mark.parametrize(
    "change, said",
    [
        ({"writer": {"user": "{question"}}, r"^prompts\.writer\.user: expected '\}'"),
        (
            {"critic": {"user": "{draft.upper}"}},
            r"^prompts\.critic\.user: placeholder \{draft\.upper\} must be a plain",
        ),
        ({"critic": {"user": "{draft:>10}"}}, r"^prompts\.critic\.user: placeholder \{draft:>10\}"),
        ({"writer": {"revise": ""}}, r"^prompts\.writer\.revise: must be a non-empty template"),
        ({"approval": ""}, r"^prompts\.approval: must be a non-empty word"),
    ],
)
def test_a_template_that_cannot_render_is_refused_naming_its_key(change, said):
    base = {
        "name": "x",
        "writer": {"system": "s", "user": "u", "revise": "r"},
        "critic": {"system": "s", "user": "u"},
    }
    data = {k: ({**base[k], **v} if isinstance(v, dict) else v) for k, v in {**base, **change}.items()}
    with pytest.raises(PromptError, match=said):
        from_mapping(data)


def test_the_approval_marker_is_what_the_stored_signal_reads():
    feedback = ["LGTM, well supported.", "APPROVED. Fine.", "lgtm", "Not LGTM"]
    assert [approved(f, "LGTM") for f in feedback] == [True, False, True, False]
    assert [approved(f) for f in feedback] == [False, True, False, False]  # the default marker: APPROVED
    columns = RoundColumns(
        gen_id=["g"] * 4, scenario_id=["s"] * 4, round=[1, 2, 3, 4], draft=["a"] * 4, feedback=feedback,
        draft_hash=["h"] * 4, writer_tokens=[1] * 4, critic_tokens=[1] * 4,
    )  # fmt: skip
    cols = trajectory_signals(columns, np.eye(4, dtype=np.float32), gold={}, embedder={"g": "e"}, approval="LGTM")
    assert cols["approved"] == [True, False, True, False]


MINE = """\
name: mine
writer:
  system: You are the Writer. Be brief.
  user: "Round: {round}\\nQ: {question}\\n{contexts}"
  revise: "Round: {round}\\nQ: {question}\\n{draft}\\n{feedback}"
critic:
  system: You are the Critic.
  user: "Round: {round}\\nQ: {question}\\n{draft}"
approval: OK
"""


def test_a_users_preset_in_their_config_dir(hydra_ctx, tmp_path):
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "mine.yaml").write_text(MINE, encoding="utf-8")
    (tmp_path / "prompts" / "typo.yaml").write_text(MINE.replace("{question}", "{questoin}", 1), encoding="utf-8")
    (tmp_path / "prompts" / "extra.yaml").write_text(MINE + "temperature: 0.3\n", encoding="utf-8")
    search = f"hydra.searchpath=[file://{tmp_path}]"
    job = to_job(compose(config_name="config", overrides=[search, "prompts=mine"]))
    assert (job.generation.prompts.name, job.generation.prompts.approval) == ("mine", "OK")
    assert job.generation.prompts.writer_user == "Round: {round}\nQ: {question}\n{contexts}"
    assert job.generation.gen_id("sim", "m") != GenerationConfig().gen_id("sim", "m")
    with pytest.raises(ConfigError, match=r"^prompts\.writer\.user: placeholder \{questoin\} names no field"):
        to_job(compose(config_name="config", overrides=[search, "prompts=typo"]))
    with pytest.raises(Exception, match=r"temperature"):  # the preset's schema refuses an unknown key
        compose(config_name="config", overrides=[search, "prompts=extra"])
