"""The per-round signals of MANY stored trajectories at once, as (trajectory, round) columns.

:class:`.signals.SignalState` computes round t's :class:`.signals.RoundSignal` one push at a time
(the live Stopper's way). Replaying a store, the DuckDB layer has whole trajectories; it computes
the same values here column-wise: each float through the same numpy reduction per row
(:func:`shp_ray.policy.scoring.row_cosine_distances` reduces each row on its own, so a batch gives
the bits one row gives), each text signal through the same text functions, once per draft, and
only when a policy reads it. :meth:`SignalColumns.history` rebuilds the RoundSignal list of one
trajectory for a family without a column-wise rule. tests/test_family_columns.py proves the columns
equal SignalState's pushes.

Rows beyond a trajectory's depth hold NaN / False / -1: no executor reads them (cap <= depth).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import cached_property

import numpy as np

from shp_ray.policy.families.signals import (
    RoundSignal,
    context_vocab,
    final_answer,
    get_verifier,
    share_in,
    share_of,
)
from shp_ray.policy.families.text import content_of, hash_canonical, token_edit_ratio, words
from shp_ray.policy.scoring import cosine_from_parts, indexed_cosine_distances


class SignalColumns:
    """Signals of B whole trajectories, rounds in order; (B, T) arrays, T = the deepest of them.

    Round inputs are given per row (R = sum of depths rows, trajectory by trajectory): the draft,
    its embedding e_t, the critique embedding g_{t-1} (``critique_known`` False where none) and the
    operational tokens of the round (writer_t + critic_{t-1}). ``checks`` (optional, per row): the loop's own
    verdict on the draft (1.0 passed, 0.0 failed; NaN: none), which replaces the named verifier's on that row,
    as SignalState.push's ``verified`` does (a code store's visible tests: analysis.replay.family_replay reads them).
    """

    def __init__(
        self,
        depths: np.ndarray,
        drafts: Sequence[str],
        embeddings: np.ndarray,
        critiques: np.ndarray,
        critique_known: np.ndarray,
        tokens: np.ndarray,
        contexts: Sequence[Sequence[str]],
        checks: np.ndarray | None = None,
    ) -> None:
        self.depth = np.asarray(depths, dtype=np.int64)
        self.B = len(self.depth)
        self.T = int(self.depth.max()) if self.B else 0
        self.drafts = list(drafts)
        self.contexts = [tuple(c) for c in contexts]
        starts = np.concatenate([[0], np.cumsum(self.depth)[:-1]]).astype(np.int64)
        self.traj = np.repeat(np.arange(self.B), self.depth)
        self.pos = np.arange(len(self.traj)) - starts[self.traj]  # 0-based round of each row
        self.e = np.asarray(embeddings, dtype=np.float32)
        g = np.asarray(critiques, dtype=np.float32)
        usable = np.asarray(critique_known, dtype=bool).copy()  # SignalState's _usable: known, not all 0, finite
        rows = np.nonzero(usable)[0]
        usable[rows] = np.any(g[rows] != 0, axis=1) & np.all(np.isfinite(g[rows]), axis=1)
        self.g, self.g_ok = g, usable
        later = np.nonzero(self.pos > 0)[0]  # rows of rounds t >= 2
        valid = self.pos_grid()
        # d_t and the drift over the (B, T, dim) float64 drafts: each a sum over one row, as row_cosine_distances
        # sums it (same bits), each norm once, the pairs as views (no gathered copies)
        e3 = self.embeddings
        self.norms = np.sqrt(np.sum(e3 * e3, axis=2))
        self.distance = np.full((self.B, self.T), np.nan)
        self.drift = np.full((self.B, self.T), np.nan)
        if self.T > 1:
            nrm = self.norms
            dist = cosine_from_parts(np.sum(e3[:, 1:] * e3[:, :-1], axis=2), nrm[:, 1:], nrm[:, :-1])
            drift = cosine_from_parts(np.sum(e3[:, 1:] * e3[:, :1], axis=2), nrm[:, 1:], nrm[:, :1])
            self.distance[:, 1:] = np.where(valid[:, 1:], dist, np.nan)
            self.drift[:, 1:] = np.where(valid[:, 1:], drift, np.nan)
        self.drift[:, :1] = 0.0  # from the first draft to itself
        d = self.distance[self.traj[later], self.pos[later]]
        # consensus c_t = (e_t + g_{t-1}) / 2 where g_{t-1} is usable, else e_t: where neither c_t nor c_(t-1)
        # has a critique, cosine(c_t, c_(t-1)) IS d_t (the same float64 rows)
        cons = d.copy()
        mixed = np.nonzero(usable[later] | usable[later - 1])[0]
        if len(mixed):
            pair = np.unique(np.concatenate([later[mixed], later[mixed] - 1]))
            c = self.e[pair].astype(np.float64)
            crit = usable[pair]
            c[crit] = (c[crit] + g[pair][crit]) / 2.0
            at = np.searchsorted(pair, later[mixed])
            cons[mixed] = indexed_cosine_distances(c, at, np.searchsorted(pair, later[mixed] - 1))
        self.consensus = self._grid(later, cons)
        self._words = [words(d) for d in self.drafts]
        n_words = np.asarray([len(w) for w in self._words], dtype=np.int64)
        prev = n_words[later - 1]
        self.length_change = self._grid(later, (n_words[later] - prev) / np.maximum(prev, 1))
        spent = np.cumsum(np.asarray(tokens, dtype=np.int64))
        spent -= np.concatenate([[0], spent])[starts][self.traj]  # per trajectory
        self.spent = np.full((self.B, self.T), np.iinfo(np.int64).max, dtype=np.int64)
        self.spent[self.traj, self.pos] = spent
        self._later = later
        self._verified: dict[str, np.ndarray] = {}
        self.checks = None if checks is None else np.asarray(checks, dtype=np.float64)
        # per row, the answer the draft states (draft_answers; None: none stored): :meth:`with_answers`
        self.answers: list[str | None] = [None] * len(self.drafts)
        # per row, the draft's token log-probability summaries (draft_logprobs; None: none): :meth:`with_confidence`
        self.confidence: list[Mapping[str, float] | None] = [None] * len(self.drafts)

    def with_answers(self, answers: Sequence[str | None]) -> SignalColumns:
        """These columns with each row's extracted answer (what the answer-based families read)."""
        if len(answers) != len(self.drafts):
            raise ValueError(f"{len(answers)} answers for {len(self.drafts)} rounds")
        self.answers = list(answers)
        return self

    def with_confidence(self, confidence: Sequence[Mapping[str, float] | None]) -> SignalColumns:
        """These columns with each row's token log-probability summaries (what the token-confidence family reads)."""
        if len(confidence) != len(self.drafts):
            raise ValueError(f"{len(confidence)} confidences for {len(self.drafts)} rounds")
        self.confidence = list(confidence)
        return self

    def _grid(self, rows: np.ndarray, values: np.ndarray, fill: float = math.nan) -> np.ndarray:
        out = np.full((self.B, self.T), fill, dtype=np.float64)
        out[self.traj[rows], self.pos[rows]] = values
        return out

    @cached_property
    def edit(self) -> np.ndarray:
        later = self._later
        ratios = [token_edit_ratio(self.drafts[r - 1], self.drafts[r]) for r in later]
        return self._grid(later, np.asarray(ratios, dtype=np.float64))

    @cached_property
    def canon_hashes(self) -> list[str]:
        return [hash_canonical(" ".join(w)) for w in self._words]  # = canonical_hash(draft)

    @cached_property
    def canon(self) -> np.ndarray:
        """Canonical hashes as integer codes (equal code = equal hash); -1 beyond a trajectory's depth."""
        codes: dict[str, int] = {}
        row_codes = np.asarray([codes.setdefault(h, len(codes)) for h in self.canon_hashes], dtype=np.int64)
        out = np.full((self.B, self.T), -1, dtype=np.int64)
        out[self.traj, self.pos] = row_codes
        return out

    @cached_property
    def _vocab(self) -> list[frozenset[str]]:
        return [context_vocab(c) for c in self.contexts]

    @cached_property
    def _plain_share(self) -> tuple[list[str | None], np.ndarray]:
        """Each draft's plain answer (final_answer) and the share of its content words in the contexts."""
        answers = [final_answer(d) for d in self.drafts]
        vocab, share = self._vocab, []
        for a, d, ws, b in zip(answers, self.drafts, self._words, self.traj.tolist(), strict=True):
            # the answer is often the whole draft: its words are split already
            share.append(share_of(content_of(ws if a == d else words(a or "")), vocab[b]))
        return answers, np.asarray(share, dtype=np.float64)

    @cached_property
    def grounded(self) -> np.ndarray:
        out = np.full((self.B, self.T), math.nan)
        out[self.traj, self.pos] = self._plain_share[1]
        return out

    def verified(self, verifier: str = "qa") -> np.ndarray:
        """(B, T) bool: the verifier ``verifier`` accepts round t's draft (False beyond the depth)."""
        if verifier not in self._verified:
            fn = get_verifier(verifier)
            fmt = getattr(fn, "answer_format", None)
            traj = self.traj.tolist()
            if fmt == "plain":  # the QA check: an answer, every content word in the contexts
                answers, share = self._plain_share
                ok = np.asarray([a is not None for a in answers], dtype=bool) & (share == 1.0)
            elif fmt is not None:
                vocab = self._vocab
                found = [final_answer(d, fmt) for d in self.drafts]
                ok = np.asarray(
                    [a is not None and share_in(a, vocab[b]) == 1.0 for a, b in zip(found, traj, strict=True)], bool
                )
            else:
                ok = np.asarray([bool(fn(d, self.contexts[b])) for d, b in zip(self.drafts, traj, strict=True)], bool)
            if self.checks is not None:  # the loop's own verdict where it has one
                ok = np.where(np.isnan(self.checks), ok, self.checks == 1.0)
            out = np.zeros((self.B, self.T), dtype=bool)
            out[self.traj, self.pos] = ok
            self._verified[verifier] = out
        return self._verified[verifier]

    @cached_property
    def embeddings(self) -> np.ndarray:
        """(B, T, dim) float64 draft embeddings (zeros beyond the depth): distances, drift, medoids."""
        out = np.zeros((self.B, self.T, self.e.shape[1]), dtype=np.float64)
        out[self.traj, self.pos] = self.e
        return out

    def pos_grid(self) -> np.ndarray:
        """(B, T) bool: round t exists in trajectory b."""
        return np.arange(self.T)[None, :] < self.depth[:, None]

    def history(self, b: int, verifier: str = "qa") -> list[RoundSignal]:
        """Trajectory b's RoundSignal list, as SignalState would have pushed it."""
        lo = int(np.searchsorted(self.traj, b))
        ver = self.verified(verifier)[b]
        return [
            RoundSignal(
                t=t + 1,
                distance=float(self.distance[b, t]),
                drift=float(self.drift[b, t]),
                consensus_distance=float(self.consensus[b, t]),
                length_change=float(self.length_change[b, t]),
                edit=float(self.edit[b, t]),
                canon=self.canon_hashes[lo + t],
                verified=bool(ver[t]),
                grounded=float(self.grounded[b, t]),
                spent=int(self.spent[b, t]),
                embedding=self.e[lo + t],
                critique=self.g[lo + t] if self.g_ok[lo + t] else None,
                answer=self.answers[lo + t],
                confidence=self.confidence[lo + t],
            )
            for t in range(int(self.depth[b]))
        ]
