"""A learned one-step gain predictor (optimal stopping): continue iff E[IS_{t+1} - IS_t] >= c.

Judge-free features of round t: d_t, the distance from the first draft, the
relative change in draft length, the word-level edit ratio to the previous
draft, the round index, and the critique embedding g_{t-1} reduced by PCA to a
few components. A ridge regression (closed form, numpy) predicts
IS_{t+1} - IS_t. It is fitted on the DEV split only (:mod:`analysis.stats.gain_fit`) and
stored as a versioned JSON artefact; the policy reads no judge at run time (consults_is is false).

Rule at round t: never before one refinement (t >= 2), halt ``low_gain`` when
the prediction < c, failsafe at T_max.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from shp_ray.policy.families.family import CRITIQUES, EMBEDDINGS, JUDGE, Family, Fitted
from shp_ray.policy.families.signals import RoundSignal

VERSION = "gain-ridge-v1"
BASE_FEATURES = ("distance", "drift", "length_change", "edit", "round")


@dataclass(frozen=True)
class GainModel:
    version: str
    features: tuple[str, ...]
    pca_mean: tuple[float, ...]
    pca_components: tuple[tuple[float, ...], ...]
    x_mean: tuple[float, ...]
    x_scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    lam: float
    n_train: int
    meta: dict[str, object] = field(default_factory=dict, compare=False)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:12]

    @classmethod
    def from_json(cls, text: str) -> GainModel:
        try:
            d = json.loads(text)
            if d.get("version") != VERSION:
                raise ValueError(f"artefact version {d.get('version')!r}, this code reads {VERSION!r}")
            return cls(
                version=d["version"],
                features=tuple(d["features"]),
                pca_mean=tuple(d["pca_mean"]),
                pca_components=tuple(tuple(c) for c in d["pca_components"]),
                x_mean=tuple(d["x_mean"]),
                x_scale=tuple(d["x_scale"]),
                coef=tuple(d["coef"]),
                intercept=float(d["intercept"]),
                lam=float(d["lam"]),
                n_train=int(d["n_train"]),
                meta=dict(d.get("meta", {})),
            )
        except (KeyError, TypeError, json.JSONDecodeError) as exc:
            raise ValueError(f"not a gain-model artefact: {exc}") from None

    def raw_features(self, sig: RoundSignal) -> np.ndarray:
        return feature_vector(sig, np.asarray(self.pca_mean), np.asarray(self.pca_components))

    def predict(self, sig: RoundSignal) -> float:
        x = (self.raw_features(sig) - np.asarray(self.x_mean)) / np.asarray(self.x_scale)
        return float(x @ np.asarray(self.coef) + self.intercept)


def feature_vector(sig: RoundSignal, pca_mean: np.ndarray, components: np.ndarray) -> np.ndarray:
    """Judge-free features of one round; unknown values (NaN) become 0."""
    base = [sig.distance, sig.drift, sig.length_change, sig.edit, float(sig.t)]
    k = len(components)
    critique = sig.critique if k else None
    pcs = (critique.astype(np.float64) - pca_mean) @ components.T if critique is not None else np.zeros(k)
    x = np.asarray([*base, *pcs], dtype=np.float64)
    return np.where(np.isfinite(x), x, 0.0)


def load(path: str | Path) -> GainModel:
    path = Path(path)
    try:
        return GainModel.from_json(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: {exc}") from None


@lru_cache(maxsize=64)
def parse(text: str) -> GainModel:
    """The fitted model a policy carries as JSON text (parsed once per distinct artefact)."""
    return GainModel.from_json(text)


def model_of(params: Mapping[str, object]) -> GainModel | None:
    text = params.get("model")
    return parse(str(text)) if text else None


def check(params: Mapping[str, Any], history: Sequence[RoundSignal], horizon: int = 0) -> str | None:
    model = model_of(params)
    if model is None or history[-1].t < 2:
        return None
    return "low_gain" if model.predict(history[-1]) < params["c"] else None


def check_params(params: Mapping[str, object]) -> None:
    c = params.get("c")
    if isinstance(c, bool) or not isinstance(c, (int, float)):
        raise ValueError(f"c must be a number, got {c!r}")


def batch_check(params: Mapping[str, object], cols: object, horizon: int = 0) -> list[tuple[str, object]] | None:
    """Unfitted: never halts (no signal read). Fitted: None, so the replay runs :func:`check` round by
    round (a stacked matrix product need not round like the one-row ``x @ coef`` it would replace)."""
    return [] if model_of(params) is None else None


FAMILY = Family(
    kind="gain_model",
    label="learned gain",
    bases={"gain_model": {"c": 0.0, "model": None}},
    check=check,
    check_params=check_params,
    # Loud: an unfitted model only ever runs to the cap.
    cap_reason=lambda params: "failsafe" if params.get("model") else "unfitted",
    needs_critique=lambda params: True,
    batch=batch_check,
    reads=(EMBEDDINGS, CRITIQUES, f"{JUDGE} on the dev split (the fit)"),
    fitted=Fitted("model", lambda source: (source if isinstance(source, GainModel) else load(source)).to_json()),
)
