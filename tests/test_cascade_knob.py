"""ARCHITECTURE.md's worked example "Adding a cascade knob": one edit of shp_ray/policy/cascade.py reaches everything.

The edits are the document's own ```diff blocks, applied in a process of its own (tests/knob_support.py: the
project's modules are imported after an import hook serves the edited text; no file of the tree is written), so the
document cannot drift from what works. Here: the derivations themselves, in this process.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.replay.policy_table import COLUMNS, policy_row
from analysis.sql import REASON_CODES, replay_sql
from shp_ray.policy.cascade import KNOBS, REASONS, HaltConfig, Reason, decide
from shp_ray.policy.table import policy_by_name
from storage.schemas import ADDED_COLUMNS, FIRST_RESULTS_KNOBS, RESULTS
from tests.knob_support import KNOB, apply, example_blocks

ROOT = Path(__file__).resolve().parent.parent


def run_stage(stage: str, tmp_path: Path) -> None:
    env = {**os.environ, "SHP_RAY_CACHE": str(tmp_path / "cache"), "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.knob_support", stage], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_example_knob_is_one_edit_of_cascade_py(tmp_path) -> None:
    run_stage("knob", tmp_path)


def test_the_example_knob_with_its_sql_rule_replays_as_decide(tmp_path) -> None:
    run_stage("rule", tmp_path)


def test_the_example_edits_only_what_it_names() -> None:
    """The blocks apply to today's source and the knob is not in the tree already."""
    blocks = example_blocks()
    assert list(blocks) == ["shp_ray/policy/cascade.py", "analysis/sql/replay_text.py"]
    for rel, diff in blocks.items():
        source = (ROOT / rel).read_text()
        assert KNOB not in source and KNOB in apply(source, diff, rel)


def test_every_consumer_reads_the_knobs_of_halt_config() -> None:
    names = [f.name for f in dataclasses.fields(HaltConfig)]
    assert [k.name for k in KNOBS] == names
    assert [c for c, _ in COLUMNS][2 : 2 + len(names)] == names  # the policies table
    assert RESULTS.names[3 : 3 + len(names)] == names  # the results schema, where the stored parts have them
    assert list(FIRST_RESULTS_KNOBS) == names and ADDED_COLUMNS["results"] == {}
    row = policy_row(policy_by_name("shp"))
    assert {n: row[n] for n in names} == dataclasses.asdict(HaltConfig())
    text = replay_sql(4, "udf")
    assert "shp_cascade(d, s, a, eps, k, warmup, cap, critic, entropy, gain, min_gain)" in text


def test_the_reason_codes_are_the_cascade_order() -> None:
    assert REASON_CODES == {1: "critic", 2: "entropy", 3: "no_gain", 4: "failsafe"}
    assert REASONS == ("critic", "entropy", "no_gain", "failsafe") and len(Reason) < 8  # t*8 + code
    decision = decide(1, [], [0.5], "", HaltConfig(max_rounds=1))
    assert decision.reason == "failsafe" and str(decision.reason) == "failsafe" and f"{decision.reason}" == "failsafe"


@pytest.mark.parametrize("executor", ["sql", "udf"])
def test_the_replay_text_names_each_knob_once(executor) -> None:
    text = replay_sql(3, executor)
    assert "p.eps, p.k, p.warmup, p.critic, p.entropy, p.gain, p.min_gain, least(p.max_rounds, x.depth) AS cap" in text
