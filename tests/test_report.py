"""write_report over a synthetic store: files, honest naming, and no half-written report on failure."""

from __future__ import annotations

import csv

import pytest

from analysis.replay.db import AnalysisError, ReplayScope
from analysis.report import main, write_report
from storage.synthetic import SYNTHETIC_JUDGE, SyntheticSpec, write_synthetic_store


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("report-store")
    write_synthetic_store(root, SyntheticSpec(n_trajectories=60, rounds=5, seed=2))
    return root


def test_report_files_and_honest_names(store, tmp_path) -> None:
    path = write_report(store, tmp_path / "out", n_resamples=200)
    out = path.parent
    for name in ("pareto.png", "tokens_saved.png", "distance_by_round.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = path.read_text()
    assert "SYNTHETIC DATA" in md and SYNTHETIC_JUDGE in md
    assert "cf. SHP Table II" in md and "cf. SHP Table III" in md
    with (out / "policy_summary.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert {r["policy"] for r in rows} >= {"shp", "entropy_only", "fixed_k6", "oracle_is", "abl_gain_only"}
    # the synthetic store holds dev and test: a row per split and policy, never the 60 pooled
    assert {r["split"] for r in rows} == {"dev", "test"}
    n = {(r["split"], r["policy"]): int(r["n"]) for r in rows}
    assert all(n[("dev", p)] + n[("test", p)] == 60 and n[("dev", p)] < 60 for p in {r["policy"] for r in rows})
    for split in ("dev", "test"):  # every headline says its split
        assert f"## Generation `synthetic-gen` · split {split} (N = {n[(split, 'shp')]} trajectories)" in md
        assert f"## Which policy saves most tokens at non-inferior IS? · split {split}" in md
    assert f"Splits: **dev (N = {n[('dev', 'shp')]}), test (N = {n[('test', 'shp')]})**" in md
    assert (out / "index.html").is_file()
    # Every row of the policy table in the markdown names a policy of the summary.
    table_policies = {line.split("|")[1].strip() for line in md.splitlines() if line.startswith("| abl_")}
    assert len(table_policies) >= 7


def test_failed_report_leaves_nothing(store, tmp_path) -> None:
    out = tmp_path / "out"
    with pytest.raises(AnalysisError):
        write_report(ReplayScope(store, judge="not-a-judge"), out)
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_cli_reports_errors_cleanly(store, tmp_path, capsys) -> None:
    assert main(["--store", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o")]) == 2
    assert "no store at" in capsys.readouterr().err


def test_policies_on_the_same_point_share_one_label():
    from analysis.report.figures import names_label, shared_points

    rows = [
        {"policy": "shp", "mean_operational_tokens": 1841.0, "mean_is": 0.682},
        {"policy": "abl_full", "mean_operational_tokens": 1841.0, "mean_is": 0.682},
        {"policy": "fixed_k3", "mean_operational_tokens": 3083.0, "mean_is": 0.682},
        {"policy": "abl_no_gain", "mean_operational_tokens": 3083.0, "mean_is": 0.6820000000001},
        {"policy": "fixed_k1", "mean_operational_tokens": 578.0, "mean_is": 0.704},
    ]
    triples = [(r["mean_operational_tokens"], r["mean_is"], r["policy"]) for r in rows]
    points = {(x, y): names for x, y, names in shared_points(triples)}
    assert points == {(1841.0, 0.682): ["abl_full", "shp"], (3083.0, 0.682): ["abl_no_gain", "fixed_k3"],
                      (578.0, 0.704): ["fixed_k1"]}  # fmt: skip
    label = names_label([f"policy_{i}" for i in range(8)], width=30)
    assert all(len(line) <= 31 for line in label.splitlines()) and label.count("policy_") == 8


def test_small_n_report_says_n_and_power_and_answer_metrics(tmp_path) -> None:
    root = tmp_path / "n4"
    write_synthetic_store(root, SyntheticSpec(n_trajectories=4, rounds=4, seed=1))
    md = write_report(root, tmp_path / "out", n_resamples=100).read_text()
    assert "| EM | F1 | ΔF1 |" not in md and "power (N for 0.8)" in md  # no draft states an answer: no EM / F1
    assert "To detect a margin δ = 0.02 with power 0.8 at this variance you need N = " in md
    assert "is not evidence" in md and "; at N = 4 the power is" in md
    rows = [line for line in md.splitlines() if line.startswith("| ") and "(N 4" in line]
    # never a bare yes/no: a "yes" with its TOST p (it rejected), a "no" with its power
    assert rows and all("power" in line or "no test" in line or "TOST p" in line for line in rows)
    baseline = next(line for line in md.splitlines() if line.startswith("| fixed_k6 |"))
    assert "zero variance" in baseline and "no test (N 4, identical to the baseline)" in baseline
    # synthetic drafts state no `Answer:` line: EM = F1 = 0 by rule, so the columns are left out, saying why
    assert md.count("- EM / F1: left out (these tasks carry no reference answers, or no returned draft states") == 1


def test_short_generation_labels() -> None:
    from analysis.report.cells import short_labels

    a, b = "732b0884273480531e6aeb351244e4a17d3e710ef8cf17f58af4fcc195464aa5", "9f" * 32
    assert short_labels([a, b, a]) == {a: "732b0884", b: "9f9f9f9f"}
    assert short_labels(["synthetic-gen", "synthetic-gen-b"]) == {"synthetic-gen": "synthetic-gen",
                                                                  "synthetic-gen-b": "synthetic-gen-b"}  # fmt: skip
    c = a[:8] + "0" * 56  # the same first 8 hex digits: cut longer, never alike
    assert short_labels([a, c]) == {a: a[:12], c: c[:12]}


def test_a_rejected_tost_is_never_called_underpowered() -> None:
    from analysis.report.power import VERDICT_KINDS, verdict, verdict_kind

    # A TOST that rejected holds at its N, whatever the planned power: green, "yes", never "underpowered".
    row = {"non_inferior": True, "degenerate": False, "tost_power": 0.16, "underpowered": True}
    assert verdict_kind(row) == "powered" and verdict_kind({**row, "tost_power": None}) == "powered"
    tests = {"n": 60, "tost_power": 0.25, "n_needed": 376, "tost_p": 1.3e-07}
    assert verdict(True, tests) == "yes (N 60, TOST p 1.3e-07)"
    assert verdict(True, {"n": 60}) == "yes (N 60)"
    # Power speaks to a "no": one that did not reject at an N below the plan is amber, never grey or green.
    no = {**row, "non_inferior": False}
    assert verdict_kind(no) == "underpowered" and VERDICT_KINDS["underpowered"][1] != VERDICT_KINDS["powered"][1]
    assert verdict_kind({**no, "tost_power": None, "underpowered": None}) == "underpowered"  # power unknown
    assert verdict_kind({**no, "tost_power": 0.9, "underpowered": False}) == "inferior"
    assert verdict(False, tests) == "no, underpowered (N 60 < 376, power 0.25)"
    assert verdict_kind({**row, "degenerate": True}) == "no_test"


def test_distance_band_is_clipped_to_the_cosine_range() -> None:
    from analysis.report.figures import clipped_band

    rows = [{"ci95_low": -0.03, "ci95_high": 0.05}, {"ci95_low": 1.9, "ci95_high": 2.4}]
    assert clipped_band(rows) == ([0.0, 1.9], [0.05, 2.0])


def test_intervals_and_charts_carry_95_percent_cis_and_n(store) -> None:
    import math

    import numpy as np
    from scipy import stats as st

    import analysis
    from analysis.report import data as report_data
    from analysis.report import html_figures

    con = analysis.connect(store)
    try:
        got = report_data.intervals(con)  # the report asks it of one split's connection; here of the whole store
        rows = con.execute(
            "SELECT operational_tokens, baseline_tokens, final_is FROM replay WHERE policy = 'shp'"
        ).fetchall()
    finally:
        con.close()
    tok, base, is_ = (np.array(c, dtype=float) for c in zip(*rows, strict=True))
    half = st.t.ppf(0.975, len(tok) - 1) * np.std(tok, ddof=1) / math.sqrt(len(tok))
    shp = got[("synthetic-gen", "shp")]
    assert shp["n"] == len(tok) == 60 and shp["tokens_ci"] == pytest.approx((tok.mean() - half, tok.mean() + half))
    saved = base - tok
    half = st.t.ppf(0.975, len(saved) - 1) * np.std(saved, ddof=1) / math.sqrt(len(saved))
    assert shp["saving_ci"] == pytest.approx(((saved.mean() - half) / base.mean(), (saved.mean() + half) / base.mean()))
    assert shp["saving_ci"][0] < saved.sum() / base.sum() < shp["saving_ci"][1]
    part = report_data.SplitData("test", [], [], [], {}, {}, [], [], {}, {}, {}, intervals=got)
    part.summary = [{"gen_id": "synthetic-gen", "policy": "shp", "n": 60, "n_is": 60, "mean_is": float(is_.mean()),
                     "mean_operational_tokens": float(tok.mean()), "token_saving": float(saved.sum() / base.sum()),
                     "non_inferior": False, "degenerate": False, "tost_power": 0.3, "underpowered": True}]  # fmt: skip
    fig = html_figures.pareto(part, "t")
    (dots,) = [t for t in fig["data"] if t["mode"] == "markers"]
    assert dots["error_x"]["array"] and dots["error_y"]["array"] and dots["marker"]["color"] == "#ff9f1c"
    assert "N = 60" in fig["layout"]["title"]["text"] and "split test" in fig["layout"]["title"]["text"]
    bars = html_figures.tokens_saved(part, "t")
    assert bars["data"][0]["error_x"]["array"] and "N = 60" in bars["layout"]["title"]["text"]


def test_the_browser_holds_at_most_its_cap_and_says_so(store) -> None:
    from analysis.report import data as report_data
    from analysis.report import html_report

    opts = report_data.Options(0.02, (0.02,), 0.06, n_resamples=50, trajectories=5)
    data = report_data.collect(ReplayScope(store), opts)
    assert [p.name for p in data.parts] == ["dev", "test"]  # one connection per split
    index, pages, policies, _ = html_report.trajectories(data.parts)
    assert [e[0] for e in index] == ["dev"] * 5 + ["test"] * 5 and sum(len(p) for p in pages) == 10
    assert all(len(t["stops"]) == len(policies) == 15 for page in pages for t in page)  # every policy's stop
    note = html_report._held_note(data.parts, index)
    total = {p.name: p.trajectories for p in data.parts}
    assert f"split dev: the first 5 of {total['dev']}" in note and total["dev"] + total["test"] == 60


def test_page_data_cannot_close_its_script_block() -> None:
    import base64
    import gzip
    import json

    from analysis.report.html_report import _json, _packed

    text = 'a draft that says </script><script>alert(1)</script> and <!-- "quoted"'
    assert "<" not in _json({"q": text}) and json.loads(_json({"q": text})) == {"q": text}
    packed = _packed([{"rounds": [[text]]}])
    assert set(packed) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
    assert json.loads(gzip.decompress(base64.b64decode(packed))) == [{"rounds": [[text]]}]
