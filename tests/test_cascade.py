"""The cascade against docs/design.md: an independent oracle, the paper's Table I, T = 1, NaN, validation."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shp_ray.policy.cascade import CONTINUE, Decision, HaltConfig, HaltTracker, decide
from shp_ray.theory_checks import distance_values, feedback_values, halt_configs, score_values


def spec_decide(t, distances, scores, feedback, cfg):
    """docs/design.md's cascade written independently: collect every rule that fires, take the first."""
    fired = []
    text = (feedback or "").strip().lower()
    if cfg.critic and text[:8] == "approved":
        fired.append("critic")
    tail = list(distances)[len(distances) - cfg.k :] if len(distances) >= cfg.k else None
    if cfg.entropy and tail is not None and not any(math.isnan(d) or d >= cfg.eps for d in tail):
        fired.append("entropy")
    if cfg.gain and t >= cfg.warmup and len(scores) >= 2:
        delta = scores[-1] - scores[-2]
        if not math.isnan(delta) and delta <= cfg.min_gain:
            fired.append("no_gain")
    if t >= cfg.max_rounds:
        fired.append("failsafe")
    return (True, fired[0]) if fired else (False, None)


@settings(max_examples=500, deadline=None, derandomize=True, database=None)
@given(
    cfg=halt_configs(),
    t=st.integers(1, 10),
    distances=st.lists(distance_values, max_size=10),
    scores=st.lists(score_values, max_size=10),
    feedback=feedback_values | st.none() | st.text(max_size=12),
)
def test_decide_matches_an_independent_implementation(cfg, t, distances, scores, feedback):
    d = decide(t, distances, scores, feedback, cfg)
    assert (d.halt, d.reason) == spec_decide(t, distances, scores, feedback, cfg)


def test_decide_matches_on_fifty_thousand_random_states():
    # Bulk agreement with plain random states (hypothesis above covers shrinking and edge cases).
    rng = random.Random(20261129)
    specials = [0.0, 0.02, 0.06, 0.1, 1.0, 2.0, math.nan]
    feedbacks = ["", "Revise", "APPROVED", " approved ok", "Not APPROVED", None]

    def value(hi: float) -> float:
        return rng.choice(specials) if rng.random() < 0.3 else rng.uniform(0.0, hi)

    for _ in range(50_000):
        cfg = HaltConfig(
            eps=rng.choice([0.0, 0.06, rng.uniform(0, 2)]),
            k=rng.randint(1, 5),
            warmup=rng.randint(1, 5),
            max_rounds=rng.randint(1, 7),
            critic=rng.random() < 0.5,
            entropy=rng.random() < 0.5,
            gain=rng.random() < 0.5,
            min_gain=rng.choice([0.0, -0.02, rng.uniform(-0.5, 0.5)]),
        )
        t = rng.randint(1, 8)
        distances = [value(2.0) for _ in range(rng.randint(0, t))]
        scores = [value(1.0) for _ in range(rng.randint(0, t + 1))]
        fb = rng.choice(feedbacks)
        d = decide(t, distances, scores, fb, cfg)
        assert (d.halt, d.reason) == spec_decide(t, distances, scores, fb, cfg), (t, distances, scores, fb, cfg)


PAPER = HaltConfig(eps=0.06, k=2, warmup=2, max_rounds=6, critic=True, entropy=True, gain=True, min_gain=0.0)


def test_paper_table_one_trace_halts_at_round_four_on_entropy():
    # "Are both Cypress and Ajuga genera?": d_t and IS_t as published.
    d = [0.144, 0.027, 0.007]
    s = [0.54, 0.62, 0.64, 0.62]
    fb = "Revise: name the families."
    assert decide(1, [], s[:1], "", PAPER) == CONTINUE
    assert decide(2, d[:1], s[:2], fb, PAPER) == CONTINUE
    assert decide(3, d[:2], s[:3], fb, PAPER) == CONTINUE  # first sub-eps distance
    assert decide(4, d[:3], s[:4], fb, PAPER) == Decision(True, "entropy")  # also no_gain; entropy ranks first


def test_issue_example():
    d = decide(t=3, distances=[0.144, 0.027], scores=[0.54, 0.62, 0.64], feedback="Revise: ...", cfg=PAPER)
    assert (d.halt, d.reason) == (False, None)


def test_failsafe_fires_at_round_one_when_max_rounds_is_one():
    # The paper's listing returns CONTINUE whenever there is no distance yet; ours must not.
    only_failsafe = HaltConfig(max_rounds=1, critic=False, entropy=False, gain=False)
    assert decide(1, [], [0.5], "", only_failsafe) == Decision(True, "failsafe")
    assert decide(1, [], [math.nan], None, HaltConfig(max_rounds=1)) == Decision(True, "failsafe")


def test_priority_order_critic_entropy_no_gain_failsafe():
    fb = "  approved. Looks right."
    assert decide(6, [0.0, 0.0], [0.9, 0.1], fb, PAPER).reason == "critic"
    assert decide(6, [0.0, 0.0], [0.9, 0.1], "Revise", PAPER).reason == "entropy"
    assert decide(6, [0.5, 0.5], [0.9, 0.1], "Revise", PAPER).reason == "no_gain"
    assert decide(6, [0.5, 0.5], [0.1, 0.9], "Revise", PAPER).reason == "failsafe"
    assert decide(5, [0.5, 0.5], [0.1, 0.9], "Revise", PAPER) == CONTINUE


def test_nan_never_halts():
    assert decide(3, [math.nan, math.nan], [0.5, 0.5, 0.5], "", HaltConfig(gain=False)) == CONTINUE
    assert decide(3, [0.5, 0.5], [0.5, 0.6, math.nan], "", PAPER) == CONTINUE
    assert decide(3, [0.5, 0.5], [0.5, math.nan, 0.1], "", PAPER) == CONTINUE


def test_boundaries_eps_is_strict_and_min_gain_inclusive():
    assert decide(3, [0.06, 0.06], [0.1, 0.2, 0.3], "", PAPER) == CONTINUE  # d < eps, not <=
    assert decide(3, [0.5, 0.5], [0.1, 0.3, 0.3], "", PAPER).reason == "no_gain"  # gain <= 0
    eps0 = HaltConfig(eps=0.0, gain=False)
    assert decide(3, [0.0, 0.0], [0.1, 0.2, 0.3], "", eps0) == CONTINUE  # eps = 0 never fires


def test_warmup_and_history_length_gate_no_gain():
    cfg = HaltConfig(warmup=3)
    assert decide(2, [0.5], [0.5, 0.1], "", cfg) == CONTINUE
    assert decide(3, [0.5, 0.5], [0.5, 0.5, 0.1], "", cfg).reason == "no_gain"
    assert decide(3, [0.5, 0.5], [0.1], "", cfg) == CONTINUE  # one score: no gain defined


def test_entropy_needs_k_distances():
    cfg = HaltConfig(k=3, gain=False)
    assert decide(3, [0.0, 0.0], [], "", cfg) == CONTINUE
    assert decide(4, [0.0, 0.0, 0.0], [], "", cfg).reason == "entropy"
    assert decide(4, [0.9, 0.0, 0.0, 0.0], [], "", cfg).reason == "entropy"  # only the last k


def test_critic_requires_the_approval_to_lead():
    for text in ("APPROVED", "approved", "  Approved\n", "APPROVED: fine"):
        assert decide(2, [0.5], [], text, PAPER).reason == "critic"
    for text in ("Not APPROVED", "APPROVE", "", None, "I approved"):
        assert decide(2, [0.5], [], text, PAPER) == CONTINUE


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"eps": -0.1}, "eps"),
        ({"eps": 2.5}, "eps"),
        ({"eps": math.nan}, "eps"),
        ({"k": 0}, "k"),
        ({"k": 1.5}, "k"),
        ({"k": True}, "k"),
        ({"warmup": 0}, "warmup"),
        ({"max_rounds": 0}, "max_rounds"),
        ({"min_gain": math.inf}, "min_gain"),
        ({"min_gain": math.nan}, "min_gain"),
        ({"critic": "yes"}, "critic"),
    ],
)
def test_config_refuses_bad_values_with_a_clear_message(kwargs, match):
    with pytest.raises(ValueError, match=match):
        HaltConfig(**kwargs)


def test_round_must_be_positive():
    with pytest.raises(ValueError, match="round t"):
        decide(0, [], [], "", PAPER)


def test_tracker_is_the_cascade_fed_one_round_at_a_time():
    tracker = HaltTracker(PAPER)
    assert tracker.observe(None, 0.54) == CONTINUE
    tracker.record_feedback("Revise")
    assert tracker.observe(0.144, 0.62) == CONTINUE
    tracker.record_feedback("Revise")
    assert tracker.observe(0.027, 0.64) == CONTINUE
    tracker.record_feedback("Revise")
    assert tracker.observe(0.007, 0.62) == Decision(True, "entropy")
    with pytest.raises(RuntimeError, match="already halted"):
        tracker.observe(0.001, 0.7)


def test_tracker_uses_the_previous_critique():
    tracker = HaltTracker(HaltConfig())
    assert tracker.observe(None, 0.5) == CONTINUE
    tracker.record_feedback("APPROVED")
    assert tracker.observe(0.5, 0.9).reason == "critic"
