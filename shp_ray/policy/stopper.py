"""The live library API: a :class:`Stopper` for a user's own Writer -> Critic loop.

    stopper = Stopper("sim_threshold", max_rounds=6)
    for t in range(1, 7):
        draft = writer(question, feedback)
        decision = stopper.observe(draft, feedback)   # feedback = the critique this draft answered
        if decision.halt:
            break
        feedback = critic(draft)
    answer = decision.draft                           # best-round variants may return an earlier one

Any policy name works: SHP's cascades (``shp``, ``entropy_only``, ``fixed_k3`` ...;
pass ``score=`` IS_t when the policy consults the judge) and the other stopping
families (:mod:`shp_ray.policy.families`). The answer-based families read each draft's
answer as ``answer(draft)`` gives it (default: the lenient QA reading, normalised:
:func:`shp_ray.policy.answer.qa_answer`; pass your task's extractor, ``str -> str | None``). The token-confidence
family reads the draft's token log-probabilities, passed as ``observe(draft, logprobs=[...])`` (the provider's, with
``logprobs: true``; or their summary, :func:`shp_ray.policy.logprobs.summarise` with a ``last_k`` of yours); a draft
observed without them never halts it. Embeddings come from the
``encode(list[str]) -> (n, dim) array`` you inject; this package does no I/O, so
``shp_ray.Stopper`` (:mod:`shp_ray.live`) is the same class with the project's
embedder as the default. Decisions equal the
replay's on the same drafts (a property test holds the three executors equal).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from shp_ray.policy.answer import qa_answer
from shp_ray.policy.cascade import HaltConfig, HaltTracker
from shp_ray.policy.families.engine import FamilyRun
from shp_ray.policy.families.gain_model import GainModel
from shp_ray.policy.families.gain_model import load as load_gain_model
from shp_ray.policy.families.text import clean_text
from shp_ray.policy.logprobs import summarise
from shp_ray.policy.scoring import cosine_distance
from shp_ray.policy.table import Policy, policy_by_name, with_params

Encode = Callable[[list[str]], np.ndarray]


@dataclass(frozen=True)
class StopDecision:
    halt: bool
    reason: str | None  # why it halted (None: continue)
    round: int
    selected_round: int  # the round whose draft to return
    draft: str
    outcome: str | None = None  # verifier-first: verified | oscillation | budget | cap
    verified: bool = False  # the returned draft passed the verifier (never claimed otherwise)


class Stopper:
    """Feed drafts in round by round; get halt/continue and the reason out."""

    def __init__(
        self,
        policy: str | Policy = "shp",
        *,
        max_rounds: int | None = None,
        halt: HaltConfig | None = None,
        contexts: Sequence[str] = (),
        encode: Encode | None = None,
        clean: bool = False,
        gain_model: str | Path | GainModel | None = None,
        answer: Callable[[str], str | None] = qa_answer,
    ) -> None:
        base = halt or HaltConfig()
        if max_rounds is not None:
            base = replace(base, max_rounds=max_rounds)
        self.policy = policy if isinstance(policy, Policy) else policy_by_name(policy, base)
        if gain_model is not None:  # a fitted artefact (analysis.stats.gain_fit writes one per generation)
            model = gain_model if isinstance(gain_model, GainModel) else load_gain_model(gain_model)
            self.policy = with_params(self.policy, model=model.to_json())
        if self.policy.kind in ("random", "oracle"):
            raise ValueError(f"{self.policy.name}: a {self.policy.kind} policy cannot run live (replay only)")
        self.contexts = tuple(contexts)
        self.clean = clean
        self.answer = answer  # the draft's answer, as the answer-based families compare it
        self._encode = encode
        self.drafts: list[str] = []
        self._prev: np.ndarray | None = None
        self.decision: StopDecision | None = None
        cap = self.policy.halt.max_rounds
        if self.policy.family:
            self._run: FamilyRun | None = FamilyRun(
                self.policy.kind, self.policy.param_dict, cap=cap, horizon=cap, contexts=self.contexts
            )
            self._tracker = None
        else:
            self._run, self._tracker = None, HaltTracker(self.policy.halt)

    @property
    def needs_critique_embedding(self) -> bool:
        return self._run is not None and self._run.family.needs_critique(self.policy.param_dict)

    def encode(self, texts: list[str]) -> np.ndarray:
        texts = [clean_text(t) for t in texts] if self.clean else texts
        if self._encode is None:
            self._encode = self.default_encoder()
        return np.asarray(self._encode(texts), dtype=np.float32)

    def default_encoder(self) -> Encode:
        """The encoder used when none was injected (:class:`shp_ray.live.Stopper` loads a real one)."""
        raise ValueError(
            "Stopper needs an encoder: pass encode=<list[str] -> (n, dim) array>, "
            "or use shp_ray.Stopper, which loads the project's sentence embedder"
        )

    def observe(
        self,
        draft: str,
        feedback: str | None = None,
        *,
        tokens: int = 0,
        score: float = math.nan,
        verified: bool | None = None,
        logprobs: Sequence[float] | Mapping[str, float] | None = None,
    ) -> StopDecision:
        """Round t's draft, the critique f_{t-1} the Writer answered, the tokens this round cost
        (writer_t + critic_{t-1}; for budgets) and IS_t (only cascades that consult the judge read it).
        ``verified``: the loop's own check of the draft (e.g. its visible tests all pass), which verifier-first
        families read in place of their verifier; None: the verifier decides. ``logprobs``: the draft's token
        log-probabilities, or their summary (what the token-confidence family reads; None: the provider gave none)."""
        if self.decision is not None and self.decision.halt:
            raise RuntimeError(f"the loop already halted at round {self.decision.round} ({self.decision.reason})")
        t = len(self.drafts) + 1
        fb = feedback or ""
        want_fb = self.needs_critique_embedding and t >= 2 and bool(fb.strip())
        vecs = self.encode([draft, fb] if want_fb else [draft])
        emb, crit = vecs[0], (vecs[1] if want_fb else None)
        self.drafts.append(draft)
        if self._run is not None:
            stated = self.answer(draft) if self._run.family.needs_answers else None
            conf = logprobs if isinstance(logprobs, Mapping) else summarise(logprobs)
            reason = self._run.step(draft, emb, crit, tokens, verified, stated, conf)
            sel = self._run.selected
            self.decision = StopDecision(
                halt=reason is not None,
                reason=reason,
                round=t,
                selected_round=sel,
                draft=self.drafts[sel - 1],
                outcome=reason if self._run.family.outcomes else None,
                verified=self._run.verified_final,
            )
        else:
            assert self._tracker is not None
            self._tracker.record_feedback(fb)
            d = None if self._prev is None else cosine_distance(emb, self._prev)
            dec = self._tracker.observe(d, score)
            self.decision = StopDecision(dec.halt, dec.reason, t, t, draft)
        self._prev = emb
        return self.decision
