"""A fitted stopping family is its module, its registration and its fit: nothing names gain_model but gain_model.

A toy family whose one parameter (``cut``, the round it stops at) is "fitted" is registered here the way a user's
would be; the sweep's fitting step (analysis.stats.fitted.with_fitted), the live Stopper's ``fitted=`` and the
reports' groups read it from its declaration.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from analysis.stats import fitted as fitted_room
from shp_ray.policy import groups
from shp_ray.policy.families import registry
from shp_ray.policy.families.family import EMBEDDINGS, Family, Fitted
from shp_ray.policy.stopper import Stopper
from shp_ray.policy.table import policy_by_name
from storage.parts import Store


def _check(params, history, horizon):
    return "cut" if params.get("cut") and len(history) >= int(str(params["cut"])) else None


def _check_params(params):
    if params.get("cut") is not None and not str(params["cut"]).isdigit():
        raise ValueError(f"cut_fit: cut must be a round number, got {params['cut']!r}")


CUT_FIT = Family(
    kind="cut_fit",
    label="fitted cut",
    bases={"cut_fit": {"cut": None}, "cut_fit_late": {"cut": None}},
    check=_check,
    check_params=_check_params,
    cap_reason=lambda params: "failsafe" if params.get("cut") else "unfitted",
    reads=(EMBEDDINGS, "a fitted cut"),
    fitted=Fitted("cut", lambda source: Path(source).read_text().strip()),
)


@pytest.fixture
def cut_fit():
    yield registry.register(CUT_FIT)
    registry.unregister(CUT_FIT.kind)  # leave the registry as the shipped families left it


def test_a_fitted_family_is_fitted_once_per_generation_through_its_declaration(cut_fit, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setitem(fitted_room.FITS, "cut_fit", lambda store, gen_id, judge, weights: calls.append(gen_id) or "2")
    policies = [policy_by_name(n) for n in ("cut_fit", "cut_fit_late", "sim_threshold", "shp")]
    assert [registry.unfitted(p.kind, p.param_dict) for p in policies] == [True, True, False, False]
    out = fitted_room.with_fitted(policies, Store(str(tmp_path)), "g1")
    assert calls == ["g1"]  # one fit for both of the family's policies
    assert [p.param_dict.get("cut") for p in out[:2]] == ["2", "2"]
    assert out[2:] == policies[2:]  # the others untouched
    assert not any(registry.unfitted(p.kind, p.param_dict) for p in out)


def test_a_fitted_family_without_its_fit_stays_unfitted_and_says_so(cut_fit, tmp_path, caplog):
    policies = [policy_by_name("cut_fit")]
    with caplog.at_level(logging.WARNING, logger="shp_ray.fitted"):
        assert fitted_room.with_fitted(policies, Store(str(tmp_path)), "g1") == policies
    assert "cut_fit stays UNFITTED" in caplog.text
    stopper = Stopper("cut_fit", max_rounds=2, encode=lambda texts: [[1.0, 0.0]] * len(texts))
    assert [stopper.observe(d).reason for d in ("a", "b")] == [None, "unfitted"]


def test_the_live_stopper_reads_a_fitted_familys_artefact_and_refuses_it_elsewhere(cut_fit, tmp_path):
    artefact = tmp_path / "cut.txt"
    artefact.write_text("2\n")
    stopper = Stopper("cut_fit", max_rounds=4, fitted=artefact, encode=lambda texts: [[1.0, 0.0]] * len(texts))
    assert [stopper.observe(d).reason for d in ("a", "b")] == [None, "cut"]
    with pytest.raises(ValueError, match=r"sim_threshold: fitted= is for the policies of a fitted family \(.*cut_fit"):
        Stopper("sim_threshold", fitted=artefact)


def test_the_reports_say_what_a_family_declares_it_reads(cut_fit):
    assert groups.group("cut_fit").needs == f"{EMBEDDINGS}, a fitted cut"
    assert groups.group("cut_fit").family == "fitted cut"
    assert "a judge's IS on the dev split (the fit)" in groups.group("gain_model").needs
