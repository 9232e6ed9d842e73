"""How large a job may be: the ranges of the magnitudes, and the plan that needs ``allow_large=true``.

A rate of 1e-300 requests a minute or a million rounds is a slip, not a setting: the first hangs
without a word, the second starts millions of paid calls. Each magnitude has a range (the rules of
:mod:`conf.resolve` say it in the message); inside it, a plan beyond the soft bounds below runs only
when the command says ``allow_large=true``, so a large run is always asked for by name.
"""

from __future__ import annotations

# Hard ranges (a value outside is a config error naming the key and the range).
RPM = (1.0, 1e6)  # requests per minute: at least one a minute (provider.rpm, provider.sim_rpm)
TPM = (1e3, 1e10)  # tokens per minute: at least one reply's worth (provider.tpm)
TIMEOUT_S = (1.0, 3600.0)  # one attempt: a second at least, an hour at most (provider.timeout_s)
POLL_S = 3600.0  # the longest wait between two looks at a batch (provider.batch_poll_s)
LATENCY_S = 600.0  # the simulated server's added latency (provider.sim_latency_s)
MAX_ROUNDS = 100  # generation.max_rounds
MAX_PARALLEL = 1024  # generation.workers, generation.concurrency, provider.max_concurrency, provider.n_threads
MAX_TOKENS = 131_072  # generation.max_tokens, provider.n_ctx
MAX_LIMIT = 10_000_000  # dataset.limit
MAX_TRIES = 100  # provider.batch_max_tries

# Soft bounds: beyond them a job runs only with allow_large=true.
SOFT_ROUNDS = 20  # the paper's runs use 3 to 6
SOFT_CALLS = 100_000  # paid calls planned: dataset.limit x generation.max_rounds x calls a round


def oversized(max_rounds: int, limit: int | None, llm_judge: bool) -> str | None:
    """Why this plan needs ``allow_large=true`` (one line, naming the key), or None if it is within bounds."""
    if max_rounds > SOFT_ROUNDS:
        return (
            f"generation.max_rounds: {max_rounds} rounds is above {SOFT_ROUNDS} (the soft bound); "
            "add allow_large=true to run it"
        )
    calls = None if limit is None else limit * max_rounds * (3 if llm_judge else 2)  # writer, critic, judge
    if calls is not None and calls > SOFT_CALLS:
        return (
            f"dataset.limit: {limit} scenarios x {max_rounds} rounds plan up to {calls:,} paid calls, above "
            f"{SOFT_CALLS:,} (the soft bound); add allow_large=true to run it"
        )
    return None
