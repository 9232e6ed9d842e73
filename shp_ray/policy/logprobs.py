"""A draft's token log-probabilities, summarised once: what the token-confidence family reads.

The provider returns one log-probability per generated token (the sampled token's, ``logprobs: true`` on an
OpenAI-compatible ``/v1/chat/completions``); each draft keeps four summaries of them (the ``draft_logprobs``
table), in nats, each <= 0 (higher: the model was surer of what it wrote):

    mean     the mean over every token (the draft's average confidence)
    min      the least likely token (the draft's weakest step)
    tail10   the mean of the lowest 10% of the tokens (at least one): DeepConf's "bottom 10%" confidence, over
             tokens rather than sliding token groups
    last_k   the mean of the last ``last_k`` tokens (all of them when fewer): where a draft states its answer,
             DeepConf's tail confidence and the trial-answer confidence of dynamic early exit

One function computes them for the generation writer and the live Stopper alike, so every executor compares the
same floats. A reply without log-probabilities (a provider that returns none, a cached reply from before they were
asked for) has no summary: None, never zeros.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

STATS = ("mean", "min", "tail10", "last_k")
DEFAULT_LAST_K = 16  # about a stated answer's line (a QA draft's "Answer: ..." is 5-15 tokens)
TAIL_SHARE = 0.1


def summarise(logprobs: Sequence[float] | None, last_k: int = DEFAULT_LAST_K) -> dict[str, float] | None:
    """{stat: value} over a draft's token log-probabilities, in token order; None when there are none, or any is
    not a finite number <= 0 (a reply that cannot be read as log-probabilities is not guessed at)."""
    if not logprobs or last_k < 1:
        return None
    vals = [float(v) for v in logprobs]
    if not all(math.isfinite(v) and v <= 0.0 for v in vals):
        return None
    n = len(vals)
    low = sorted(vals)[: max(1, math.ceil(TAIL_SHARE * n))]
    tail = vals[-last_k:]
    return {"mean": math.fsum(vals) / n, "min": low[0], "tail10": math.fsum(low) / len(low),
            "last_k": math.fsum(tail) / len(tail)}  # fmt: skip
