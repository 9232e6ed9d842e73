"""ARCHITECTURE.md's cascade knob, run in a process of its own (tests/test_cascade_knob.py).

``python -m tests.knob_support knob``: the source edited by the document's first block only (shp_ray/policy/cascade.py:
the field, its check, its use in decide()), then the knob followed to the config, the ``policies`` table, the UDF's
stop rounds, the ``results`` schema and rows, and a shipped store's older ``results`` parts.
``python -m tests.knob_support rule``: both blocks (the SQL executor's term too); the SQL replay equals the UDF and
the reference replay over a grid of knobs.

The edited modules are loaded from the edited text by an import hook installed before anything of the project is
imported; no file of the tree is written. Exit 0, or an AssertionError's traceback.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import random
import re
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "ARCHITECTURE.md"
KNOB = "entropy_warmup"


def example_blocks() -> dict[str, str]:
    """{source path: its ```diff block} of ARCHITECTURE.md's "Adding a cascade knob", in the document's order."""
    found = re.findall(r"<!-- example-knob(?:-\w+)?: (\S+) -->\s*```diff\n(.*?)```", DOC.read_text(), re.DOTALL)
    assert len(found) == 2, "ARCHITECTURE.md lost its cascade knob example: two ```diff blocks after <!-- example-knob"
    return dict(found)


def apply(source: str, diff: str, where: str) -> str:
    """``source`` with each hunk of ``diff`` (after its ``@@`` label: ' ' context, '-' removed, '+' added lines)
    applied; a hunk's old lines must occur exactly once."""
    for hunk in re.split(r"^@@.*\n", diff, flags=re.MULTILINE)[1:]:
        lines = hunk.splitlines()
        old = "\n".join(line[1:] for line in lines if line[:1] in " -") + "\n"
        new = "\n".join(line[1:] for line in lines if line[:1] in " +") + "\n"
        assert source.count(old) == 1, f"{where}: the example's hunk no longer matches the source:\n{old}"
        source = source.replace(old, new)
    return source


class EditedSources(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Loads the named modules from edited text instead of their files."""

    def __init__(self, sources: dict[str, tuple[Path, str]]) -> None:
        self.sources = sources

    def find_spec(self, name, path=None, target=None):  # noqa: ANN001, ANN201
        if name not in self.sources:
            return None
        return importlib.util.spec_from_loader(name, self, origin=str(self.sources[name][0]))

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        path, text = self.sources[module.__name__]
        module.__file__ = str(path)
        exec(compile(text, str(path), "exec"), module.__dict__)  # noqa: S102  (the document's edit of our own source)


def install(paths: list[str]) -> None:
    blocks = example_blocks()
    sources = {}
    for rel in paths:
        path = ROOT / rel
        sources[rel.removesuffix(".py").replace("/", ".")] = (path, apply(path.read_text(), blocks[rel], rel))
    sys.meta_path.insert(0, EditedSources(sources))


def trajectory(sid: str, distances: list[float], approved_at: int | None = None):  # noqa: ANN201
    from shp_ray.policy.trajectory import Round, Trajectory

    feedback = ["APPROVED" if t == approved_at else "Revise." for t in range(1, len(distances) + 2)]
    same = {"writer_tokens": 10, "critic_tokens": 3, "judge_tokens": 5, "is_score": 0.3}
    rounds = [Round(1, feedback=feedback[0], **same)]
    rounds += [Round(t, distance=d, feedback=feedback[t - 1], **same) for t, d in enumerate(distances, start=2)]
    return Trajectory(sid, tuple(rounds))


def follow_the_knob() -> None:
    """The document's first block alone: the knob reaches every consumer of the cascade's parameters."""
    import pyarrow.parquet as pq

    import conf.schema
    from analysis.replay.db import connect_signals
    from shp_ray.policy.cascade import HaltConfig, decide
    from shp_ray.policy.table import Policy
    from storage.part_rules import schema_problems
    from storage.parts import Store
    from storage.schemas import ADDED_COLUMNS, RESULTS
    from sweeps.command_line import SECTIONS
    from sweeps.job import result_rows
    from tests.test_replay_property import signals_table

    assert KNOB in conf.schema.HALTING_KEYS and conf.schema.HaltingConf().entropy_warmup == 1  # halting.entropy_warmup
    assert KNOB in SECTIONS["halting"]  # shp-sweep --help
    assert decide(2, [0.0], [0.3, 0.3], "", HaltConfig(entropy_warmup=3, critic=False, gain=False, k=1)).halt is False

    # entropy (k=1, eps 0.5) fires at round 2 on "s"; waiting for round 3 stops at 3 (its distance is low too).
    base = {"critic": False, "gain": False, "k": 1, "eps": 0.5}
    pols = [
        Policy("early", "cascade", HaltConfig(**base)),
        Policy("late", "cascade", HaltConfig(**base, entropy_warmup=3)),
    ]
    con = connect_signals(signals_table([trajectory("s", [0.1, 0.1, 0.9])]), pols)
    try:
        cells = con.sql(f"SELECT policy::VARCHAR, {KNOB} FROM policies ORDER BY 1").fetchall()
        assert cells == [("early", 1), ("late", 3)], cells
        assert dict(con.sql("SELECT column_name, column_type FROM (DESCRIBE policies)").fetchall())[KNOB] == "INTEGER"
        udf = con.sql("SELECT policy::VARCHAR, stop_round, reason FROM replay_udf ORDER BY 1").fetchall()
        assert udf == [("early", 2, "entropy"), ("late", 3, "entropy")], udf  # the value reached decide() in the UDF
        replayed = con.sql("SELECT * FROM replay ORDER BY policy").to_arrow_table()
    finally:
        con.close()

    assert RESULTS.field(KNOB).type == RESULTS.field("k").type and ADDED_COLUMNS["results"] == {KNOB: 1}
    job = SimpleNamespace(policies=pols, weights=SimpleNamespace(strategy="uniform"))
    rows = result_rows(replayed, job, "run", "job", "lexical", {"f1": 1.0})
    assert rows.schema == RESULTS and rows[KNOB].to_pylist() == [1, 3]

    # The shipped stores' results parts predate the knob: sound still, and read as its default (a store whose run is
    # still resuming has replayed nothing yet: no results parts).
    replayed_stores = [s for s in sorted((ROOT / "results").glob("*/store")) if Store(str(s)).parts("results")]
    assert len(replayed_stores) >= 2
    for store in replayed_stores:
        parts = Store(str(store)).parts("results")
        for part in parts:
            assert schema_problems("results", pq.read_schema(part)) == [], part
        stored = Store(str(store)).read("results")
        assert stored.num_rows and set(stored[KNOB].to_pylist()) == {1}, store


def rule_holds() -> None:
    """Both blocks: the SQL executor's term keeps it equal to the UDF and the reference over a grid of knobs."""
    from analysis.replay.db import connect_signals
    from shp_ray.policy.cascade import HaltConfig
    from shp_ray.policy.reference import replay
    from shp_ray.policy.table import Policy
    from tests.test_replay_property import signals_table

    rng = random.Random(46)
    trajs = []
    for i in range(24):
        depth = rng.randint(1, 7)
        distances = [rng.choice([0.01, 0.05, 0.3, 0.9]) for _ in range(depth - 1)]
        trajs.append(trajectory(f"s{i}", distances, rng.choice([None, 2, 3, 5])))
    pols = [
        Policy(f"c{w}-{k}-{c}", "cascade", HaltConfig(eps=0.1, k=k, critic=c, gain=False, max_rounds=6, **{KNOB: w}))
        for w in (1, 2, 3, 5)
        for k in (1, 2)
        for c in (False, True)
    ]
    con = connect_signals(signals_table(trajs), pols)
    try:
        named, by_id = {p.name: p for p in pols}, {t.scenario_id: t for t in trajs}
        for view in ("replay", "replay_udf"):
            rows = con.sql(f"SELECT policy::VARCHAR, scenario_id, stop_round, reason FROM {view}").fetchall()
            assert len(rows) == len(pols) * len(trajs)
            for name, sid, tau, reason in rows:
                ref = replay(named[name], by_id[sid])
                assert (tau, reason) == (ref.stop_round, ref.reason), (view, name, sid, tau, reason, ref)
    finally:
        con.close()


if __name__ == "__main__":
    stage = sys.argv[1]
    blocks = list(example_blocks())
    install(blocks[:1] if stage == "knob" else blocks)
    follow_the_knob() if stage == "knob" else rule_holds()
