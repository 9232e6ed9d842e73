"""Each stopping family's rule on hand-made rounds (no model: vectors are given)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis.stats import gain_fit
from shp_ray import HaltConfig, HaltTracker, Stopper
from shp_ray.policy.families import canonical, gain_model
from shp_ray.policy.families.semantic import dynamic_schedule
from shp_ray.policy.families.signals import SignalState, qa_verifier
from shp_ray.policy.families.verifier import OscillationDetector
from shp_ray.policy.scoring import cosine_distance

CTX = ["The Eiffel Tower is in Paris, France. It was finished in 1889."]


def unit(*xs: float) -> np.ndarray:
    v = np.asarray(xs, dtype=np.float64)
    return v / np.linalg.norm(v)


def vectors(mapping: dict[str, np.ndarray]):
    return lambda texts: np.stack([mapping.get(t, np.zeros(3)) for t in texts]).astype(np.float32)


def test_qa_verifier_needs_every_content_word_in_the_contexts_and_the_format() -> None:
    plain, marker = qa_verifier("plain"), qa_verifier("marker")
    assert plain("Paris, 1889.", CTX)
    assert not plain("Paris, 1890.", CTX)  # 1890 is in no context
    assert not plain("", CTX) and not plain("the of", CTX)  # no answer, no content
    assert marker("Reasoning here.\nFinal answer: Paris", CTX)
    assert not marker("Paris", CTX)  # the required "Final answer:" line is missing


def test_canonical_form_folds_case_whitespace_and_punctuation() -> None:
    assert canonical("  Paris,   FRANCE!! ") == canonical("paris france") == "paris france"
    assert canonical("Paris") != canonical("Rome")


def test_oscillation_detector_cycle_length_and_bounded_history() -> None:
    det = OscillationDetector(cycle=2, history=10)
    assert [det.seen(h) for h in "ABA"] == [False, False, True]  # A -> B -> A
    det = OscillationDetector(cycle=1, history=10)
    assert [det.seen(h) for h in "ABA"] == [False, False, False]  # only a repeat of the last draft counts
    assert det.seen("A") is True
    det = OscillationDetector(cycle=3, history=2)
    assert [det.seen(h) for h in "ABCA"] == [False, False, False, False]  # A fell out of the history


def test_verifier_first_outcomes_are_loud_and_never_claim_verification() -> None:
    enc = vectors({"Rome.": unit(1, 0, 0), "rome": unit(1, 0.1, 0), "London": unit(0, 1, 0), "Paris.": unit(0, 0, 1)})
    s = Stopper("verifier", max_rounds=3, contexts=CTX, encode=enc)
    assert [s.observe(d).halt for d in ("Rome.", "Paris.")] == [False, True]
    assert (s.decision.outcome, s.decision.verified) == ("verified", True)

    s = Stopper("oscillation", max_rounds=6, contexts=CTX, encode=enc)
    outs = [s.observe(d).outcome for d in ("Rome.", "London", "rome")]  # "rome" == "Rome." canonically
    assert outs == [None, None, "oscillation"] and s.decision.verified is False

    s = Stopper("budget@budget=100", max_rounds=6, contexts=CTX, encode=enc)
    outs = [s.observe(d, tokens=40).outcome for d in ("Rome.", "London", "Rome, Italy")]
    assert outs == [None, None, "budget"] and not s.decision.verified

    s = Stopper("verifier", max_rounds=2, contexts=CTX, encode=enc)
    outs = [s.observe(d).outcome for d in ("Rome.", "London")]
    assert outs == [None, "cap"] and not s.decision.verified


def test_semantic_modes() -> None:
    a, b, c = unit(1, 0, 0), unit(1, 0.05, 0), unit(1, 0.06, 0.01)
    enc = vectors({"a": a, "b": b, "c": c, "x": unit(0, 1, 0)})
    assert Stopper("sim_threshold@threshold=0.99,n=1", encode=enc).observe("a").halt is False
    s = Stopper("sim_threshold@threshold=0.99,n=2", encode=enc)
    assert [s.observe(d).halt for d in "abc"] == [False, False, True]
    s = Stopper("window_mean@threshold=0.01,n=2", encode=enc)
    assert [s.observe(d).halt for d in "xab"] == [False, False, False]  # the window still holds x -> a
    s = Stopper("drift@tol=0.01,n=1", encode=enc)
    assert [s.observe(d).reason for d in ("a", "x", "x")] == [None, None, "drift"]  # distance from "a" stopped moving
    # never on NaN / zero vectors: an empty draft's distance is 1.0
    s = Stopper("sim_threshold@threshold=0.01", encode=enc)
    assert [s.observe(d).halt for d in ("a", "")] == [False, False]


def test_dynamic_threshold_is_looser_early_and_stricter_late() -> None:
    ts = [dynamic_schedule(t, 0.9, 0.97, 6) for t in range(2, 7)]
    assert ts[0] == 0.9 and ts[-1] == pytest.approx(0.97) and ts == sorted(ts)
    step = math.acos(0.95)  # every successive draft at similarity 0.95: between the early and the late threshold
    enc = vectors({d: unit(math.cos(i * step), math.sin(i * step), 0) for i, d in enumerate("abcd")})
    s = Stopper("dynamic_threshold@start=0.9,end=0.97", max_rounds=6, encode=enc)
    assert [s.observe(d).reason for d in "ab"] == [None, "dynamic"]  # round 2: 0.9 suffices
    s = Stopper("sim_threshold@threshold=0.97", max_rounds=6, encode=enc)
    assert [s.observe(d).halt for d in "abcd"] == [False] * 4  # a fixed strict threshold never fires


def test_consensus_uses_the_critique_embedding() -> None:
    enc = vectors({"a": unit(1, 0, 0), "b": unit(1, 0, 0), "crit1": unit(0, 1, 0)})
    s = Stopper("consensus@threshold=0.99", encode=enc)
    assert [s.observe(d, f).halt for d, f in (("a", None), ("b", "crit1"))] == [False, False]  # critique moved c_t
    s = Stopper("sim_threshold@threshold=0.99", encode=enc)
    assert [s.observe(d, f).halt for d, f in (("a", None), ("b", "crit1"))] == [False, True]


def test_best_round_returns_an_earlier_draft() -> None:
    enc = vectors({"Paris, 1889.": unit(1, 0, 0), "Paris, 1900.": unit(1, 0.2, 0), "Rome": unit(0, 1, 0)})
    s = Stopper("best_grounded", max_rounds=3, contexts=CTX, encode=enc)
    for d in ("Paris, 1889.", "Paris, 1900.", "Rome"):
        dec = s.observe(d)
    assert dec.halt and dec.selected_round == 1 and dec.draft == "Paris, 1889."
    s = Stopper("best_medoid", max_rounds=3, encode=enc)
    for d in ("Paris, 1889.", "Rome", "Paris, 1900."):
        dec = s.observe(d)
    assert dec.selected_round in (1, 3) and dec.draft.startswith("Paris")


def _history(rng: np.random.Generator, depth: int) -> list:
    st = SignalState()
    for t in range(depth):
        st.push("w " * int(rng.integers(1, 9)), rng.normal(size=4), rng.normal(size=4) if t else None, 5)
    return st.history


def test_gain_model_fits_a_known_relation_and_round_trips(tmp_path) -> None:
    rng = np.random.default_rng(1)
    hists = [_history(rng, 5) for _ in range(40)]
    # the target IS_{t+1} - IS_t = 0.5 * d_t exactly: the ridge must recover it from the features
    # IS_1 = IS_2 = 0, then IS_{t+1} = IS_t + 0.5 * d_t for t = 2..4
    scores = [[0.0, *np.cumsum([0.0] + [0.5 * h[i].distance for i in range(1, 4)])] for h in hists]
    model = gain_fit.fit(hists, scores, n_components=2, lam=1e-6)
    preds = [(model.predict(h[i]), 0.5 * h[i].distance) for h in hists for i in range(1, 4)]
    p, y = np.array(preds).T
    assert np.corrcoef(p, y)[0, 1] > 0.99
    path = gain_fit.save(model, tmp_path / "m.json")
    again = gain_model.load(path)
    assert again == model and again.digest == model.digest
    bad = tmp_path / "old.json"
    bad.write_text(path.read_text().replace(gain_model.VERSION, "gain-ridge-v0"))
    with pytest.raises(ValueError, match="version"):
        gain_model.load(bad)


def test_gain_model_policy_never_stops_before_one_refinement_and_has_a_failsafe(tmp_path) -> None:
    from shp_ray.policy.table import policy_by_name, with_params

    rng = np.random.default_rng(2)
    hists = [_history(rng, 4) for _ in range(10)]
    model = gain_fit.fit(hists, [list(rng.uniform(size=4)) for _ in hists], n_components=0)
    enc = vectors({str(i): unit(1, i, 0) for i in range(9)})
    always = with_params(policy_by_name("gain_model@c=1000000.0"), model=model.to_json())
    s = Stopper(always, encode=enc)
    assert [s.observe(str(i)).reason for i in range(2)] == [None, "low_gain"]  # t = 1 never halts
    never = with_params(policy_by_name("gain_model@c=-1000000.0", HaltConfig(max_rounds=3)), model=model.to_json())
    s = Stopper(never, encode=enc)
    assert [s.observe(str(i)).reason for i in range(3)] == [None, None, "failsafe"]
    path = gain_fit.save(model, tmp_path / "gain.json")
    s = Stopper("gain_model@c=1000000.0", fitted=path, encode=enc)  # the artefact, as a sweep writes it
    assert [s.observe(str(i)).reason for i in range(2)] == [None, "low_gain"]
    s = Stopper("gain_model", max_rounds=2, encode=enc)  # unfitted: says so, at the cap
    assert [s.observe(str(i)).reason for i in range(2)] == [None, "unfitted"]


def test_stopper_runs_shp_cascades_like_the_halt_tracker() -> None:
    enc = vectors({"a": unit(1, 0, 0), "b": unit(1, 0.01, 0), "c": unit(1, 0.02, 0)})
    s, tr = Stopper("entropy_only", encode=enc), HaltTracker(HaltConfig(critic=False, gain=False))
    for i, d in enumerate("abc"):
        dist = None if i == 0 else cosine_distance(enc([d])[0], enc(["abc"[i - 1]])[0])
        assert s.observe(d).halt == tr.observe(dist, math.nan).halt
    with pytest.raises(RuntimeError, match="already halted"):
        s.observe("a")
    with pytest.raises(ValueError, match="cannot run live"):
        Stopper("oracle_is")
