"""ARCHITECTURE.md's worked example: a new stopping family is one file plus its registration.

The example module is read from ARCHITECTURE.md itself (so the document cannot drift from
what works), registered, and replayed in DuckDB SQL next to the reference executor and the
live Stopper over the same drafts.
"""

from __future__ import annotations

import importlib.util
import math
import re
from pathlib import Path

import pytest

import analysis
from shp_ray.generation.records import load_trajectories
from shp_ray.policy.families import registry
from shp_ray.policy.reference import replay
from shp_ray.policy.table import policy_by_name
from storage.parts import Store
from tests.test_families_property import live, make_encoder, write_store

DOC = Path(__file__).resolve().parent.parent / "ARCHITECTURE.md"


def example_source() -> str:
    text = DOC.read_text()
    m = re.search(r"<!-- example-family: (\S+) -->\s*```python\n(.*?)```", text, re.DOTALL)
    assert m, "ARCHITECTURE.md lost its worked example (the ```python block after <!-- example-family: ... -->)"
    return m.group(2)


@pytest.fixture
def edit_plateau(tmp_path):
    path = tmp_path / "edit_plateau.py"
    path.write_text(example_source())
    spec = importlib.util.spec_from_file_location("edit_plateau_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fam = registry.register(module.FAMILY)  # the registration line of the example
    try:
        yield fam
    finally:  # leave the registry as the shipped families left it
        registry.unregister(fam.kind)


def test_the_example_family_replays_in_sql_as_in_python_and_live(tmp_path, edit_plateau) -> None:
    # s0 keeps rewriting; s1 settles (the same words from round 2 on); s2 settles at once.
    trajs = [
        ("s0", ["one two three", "four five six", "seven eight nine", "ten eleven twelve"],
         ["More.", "More.", "More.", ""], [(10, 4)] * 4, [0.2, 0.3, 0.4, 0.5], []),
        ("s1", ["a b c d", "a b c d e", "a b c d e", "a b c d e"],
         ["Add e.", "Fine.", "Fine.", ""], [(10, 4)] * 4, [0.2, 0.6, 0.6, 0.6], []),
        ("s2", ["x y", "x y", "x y", "x y"], ["Ok.", "Ok.", "Ok.", ""], [(10, 4)] * 4, [0.5] * 4, []),
    ]  # fmt: skip
    encode = make_encoder(0.0)
    write_store(str(tmp_path), trajs, encode)
    pols = [policy_by_name("edit_plateau"), policy_by_name("edit_plateau@n=1"), policy_by_name("shp")]
    assert pols[0].family and pols[0].kind == "edit_plateau" and pols[1].param_dict["n"] == 1
    con = analysis.connect(str(tmp_path), policies=pols)
    try:
        rows = con.sql(
            "SELECT policy, scenario_id, stop_round, reason, operational_tokens, final_is FROM replay"
        ).fetchall()
        kinds = dict(con.sql("SELECT policy, kind FROM policies").fetchall())
    finally:
        con.close()
    assert kinds["edit_plateau"] == "edit_plateau"
    got = {(r[0], r[1]): r[2:] for r in rows}
    ref = load_trajectories(Store(str(tmp_path)), "g", judge="j")
    for p in pols:
        for sid, drafts, fbs, tokens, _, ctx in trajs:
            o = replay(p, ref[sid])
            stop, reason, op, fin = got[(p.name, sid)]
            assert (stop, reason, op) == (o.stop_round, o.reason, o.operational_tokens)
            assert fin == pytest.approx(o.final_is) or (fin is None and math.isnan(o.final_is))
            if p.family:
                l_tau, l_reason, _ = live(p, drafts, fbs, tokens, ctx, encode)
                assert l_tau == stop and l_reason in (reason, None)
    # the family does what its doc says: halts once the Writer stops changing words for n rounds
    assert got[("edit_plateau", "s0")][:2] == (4, "failsafe")
    assert got[("edit_plateau", "s1")][:2] == (4, "edit_plateau")  # edits at rounds 3 and 4 are 0
    assert got[("edit_plateau@n=1", "s1")][:2] == (3, "edit_plateau")
    assert got[("edit_plateau", "s2")][:2] == (3, "edit_plateau")


def test_registration_refuses_a_clash(edit_plateau) -> None:
    with pytest.raises(ValueError, match="already registered"):
        registry.register(edit_plateau)
    with pytest.raises(ValueError, match="tol must be in"):
        policy_by_name("edit_plateau@tol=2.0")
