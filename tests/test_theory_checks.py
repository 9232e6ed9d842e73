"""The machine-checked claims pass, and they would catch a cascade without its failsafe."""

from __future__ import annotations

import subprocess
import sys

from shp_ray import theory_checks
from shp_ray.policy import cascade
from shp_ray.policy.cascade import CONTINUE


def test_all_claims_pass():
    lines: list[str] = []
    assert theory_checks.run(examples=150, out=lines.append)
    assert len(lines) == len(theory_checks.CLAIMS)
    assert all(line.startswith("PASS") for line in lines)


def test_removing_the_failsafe_fails_theorem_one(monkeypatch):
    real = cascade.decide

    def without_failsafe(t, distances, scores, feedback, cfg):
        d = real(t, distances, scores, feedback, cfg)
        return CONTINUE if d.reason == "failsafe" else d

    monkeypatch.setattr(cascade, "decide", without_failsafe)
    lines: list[str] = []
    assert not theory_checks.run(examples=150, out=lines.append, claims=theory_checks.CLAIMS[:1])
    assert lines[0].startswith("FAIL  Theorem 1")


def test_the_papers_listing_fails_theorem_one(monkeypatch):
    # Listing 1 returns CONTINUE whenever no distance exists yet, so max_rounds = 1 halts at round 2.
    real = cascade.decide

    def paper_listing(t, distances, scores, feedback, cfg):
        return CONTINUE if not distances else real(t, distances, scores, feedback, cfg)

    monkeypatch.setattr(cascade, "decide", paper_listing)
    lines: list[str] = []
    assert not theory_checks.run(examples=150, out=lines.append, claims=theory_checks.CLAIMS[:1])
    assert lines[0].startswith("FAIL  Theorem 1")


def test_command_line_exit_status():
    done = subprocess.run(
        [sys.executable, "-m", "shp_ray.theory_checks", "--examples", "40"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASS") == 3
