"""The ``draft_logprobs`` table: one row per round whose draft came with token log-probabilities, summarised.

Written beside ``draft_answers`` by the generation writer when the run asked the provider for log-probabilities
(``logprobs.request=true``) and the provider returned them (the embedded llama-server and OpenAI-compatible
endpoints do); read by the token-confidence family (``confidence``). Its own table, so no stored part is
rewritten and a store without it replays as before, that family left out. The four summaries are in nats
(shp_ray.policy.logprobs: ``mean``, ``min``, ``tail10``, ``last_k``, the mean of the last ``k`` tokens);
``tokens``: how many log-probabilities they summarise. A reply without them has no row, never zeros. Written before
the trajectory's rounds (storage.writer): a kill between the two regenerates the trajectory from the response cache,
so a round may hold two equal rows, which the readers read once.
"""

from __future__ import annotations

import pyarrow as pa

DRAFT_LOGPROBS = pa.schema(
    [
        ("gen_id", pa.string()),
        ("scenario_id", pa.string()),
        ("round", pa.int32()),
        ("tokens", pa.int32()),
        ("k", pa.int32()),
        ("mean", pa.float64()),
        ("min", pa.float64()),
        ("tail10", pa.float64()),
        ("last_k", pa.float64()),
    ]
)
REQUIRED = ("gen_id", "scenario_id", "round", "tokens", "k", "mean", "min", "tail10", "last_k")
# storage.part_rules' value rules beside the round's: a count of at least 1, and log-probabilities (<= 0, no NaN)
RANGES = {"tokens": (1, None, False), "k": (1, None, False), **{s: (None, 0.0, False) for s in REQUIRED[5:]}}
