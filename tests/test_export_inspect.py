"""shp-export --format inspect of a generated (not imported) store: each round's answer EM / F1 and the judge's IS go
out as inspect_ai scores beside the scores table's, read back with inspect_ai's own read_eval_log; --judge picks the
judge when the store has several (tests/test_import_inspect.py exports imported stores)."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest

pytest.importorskip("inspect_ai", reason="the dev extras (inspect-ai) are not installed")

from inspect_ai.log import read_eval_log  # noqa: E402

import analysis  # noqa: E402
from exporter import main as export_main  # noqa: E402
from storage.parts import Store  # noqa: E402
from storage.schemas import JUDGMENTS  # noqa: E402
from storage.synthetic import SyntheticSpec, write_synthetic_store  # noqa: E402

OTHER = "other-v1 (a second judge of the same drafts, for the test)"
MEASURES = ("answer_em", "answer_f1", "is_score")


@pytest.fixture
def generated(tmp_path):
    root = tmp_path / "store"
    write_synthetic_store(root, SyntheticSpec(n_trajectories=4, rounds=3, seed=5))
    return root


def _measures(store, judge: str | None = None) -> dict[tuple[str, int], dict[str, float]]:
    """Each round's answer EM / F1 and IS as the replay reads them: what the export must carry."""
    con = analysis.connect(str(store), judge=judge, policies=[])
    try:
        rows = con.table("rounds").to_arrow_table().to_pylist()
    finally:
        con.close()
    return {(r["scenario_id"], r["round"]): {m: r[m] for m in MEASURES if r[m] is not None and math.isfinite(r[m])}
            for r in rows}  # fmt: skip


def _exported(path) -> dict[tuple[str, int], dict[str, float]]:
    """Each round's scores in the log: the intermediate score events after its draft (the t-th Writer call)."""
    got: dict[tuple[str, int], dict[str, float]] = {}
    for s in read_eval_log(str(path)).samples:
        t = 0
        for e in s.events:
            if e.event == "model" and e.role is None:
                t += 1
            elif e.event == "score" and e.intermediate:
                got.setdefault((s.metadata["scenario_id"], t), {})[e.scorer] = e.score.value
        last = max(r for sid, r in got if sid == s.metadata["scenario_id"])
        assert {k: v.value for k, v in s.scores.items()} == got[(s.metadata["scenario_id"], last)]
    return got


def test_a_generated_store_exports_its_rounds_answer_scores_and_judge_is(generated, tmp_path, capsys) -> None:
    out = tmp_path / "gen.eval"
    assert export_main([str(generated), str(out)]) == 0
    want = _measures(generated)
    assert _exported(out) == want
    assert {m for v in want.values() for m in v} == set(MEASURES)  # all three are there to export
    log = read_eval_log(str(out))
    assert log.eval.metadata["judge"].startswith("synthetic-v1")
    assert {s.name for s in log.results.scores} == set(MEASURES)


def test_judge_picks_the_is_exported_when_the_store_has_several(generated, tmp_path, capsys) -> None:
    store = Store(str(generated))
    rows = store.read("judgments").to_pylist()
    for i, r in enumerate(rows):  # the same drafts judged again by another judge, with other metrics
        r |= {"judge": OTHER, "judge_key": f"other-{i}", "faithfulness": 1.0 - r["faithfulness"]}
    store.write("judgments", pa.Table.from_pylist(rows, schema=JUDGMENTS), JUDGMENTS)
    out = tmp_path / "gen.eval"
    assert export_main([str(generated), str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("shp-export: several judges in the store") and "--judge" in err and err.count("\n") == 1
    assert not out.exists()
    for judge in ("other-v1", "synthetic-v1"):
        assert export_main([str(generated), str(out), "--judge", judge]) == 0
        assert _exported(out) == _measures(generated, judge)
        assert read_eval_log(str(out)).eval.metadata["judge"].startswith(judge)
    cut = tmp_path / "cut.eval"
    assert export_main([str(generated), str(cut), "--policy", "fixed_k1", "--judge", "other-v1"]) == 0
    first = {k: v for k, v in _measures(generated, "other-v1").items() if k[1] == 1}
    assert _exported(cut) == first
