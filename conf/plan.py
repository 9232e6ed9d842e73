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


# --- the plan a job prints before it pays (sweeps.plan gathers the facts, these are its arithmetic) ---

# ESTIMATES, not measurements of this machine: the embedded models' throughput on 2 CPU threads
# (llama.cpp, no-AMX build), as (prompt tokens/s, generated tokens/s). The plan's wall time on the
# embedded server is tokens / these rates, one call at a time (2 threads serve one slot at full speed).
EMBEDDED_TOK_S_ESTIMATE = {
    "smollm2-135m-instruct": (280.0, 90.0),
    "qwen2.5-coder-0.5b-instruct": (130.0, 27.0),
    "qwen2.5-coder-1.5b-instruct": (72.0, 12.0),
}
SLOWEST_TOK_S_ESTIMATE = (72.0, 12.0)  # an alias without a figure: assume the slowest model's rates

# Gates: a plan beyond them stops and asks for +confirm=true (a run of hours, or a real bill, by name).
CONFIRM_EMBEDDED_S = 2 * 3600.0  # two hours on the embedded model
CONFIRM_PAID_USD = 10.0  # ten dollars on a paid endpoint (the mode the job pays: live or batch)


def calls_per_scenario(max_rounds: int, llm_judge: bool, critic_calls: bool = True) -> int:
    """Paid calls of one trajectory: a Writer call each round, a Critic call each round but the last
    (its critique is never read; none when the Critic is a test report: critic=tests), and a judge call
    each round when the judge is an LLM."""
    return max_rounds + (max_rounds - 1 if critic_calls else 0) + (max_rounds if llm_judge else 0)


def embedded_seconds(model: str, input_tokens: float, output_tokens: float) -> float:
    """Estimated wall time of the calls on the embedded llama.cpp server (EMBEDDED_TOK_S_ESTIMATE)."""
    prompt_rate, gen_rate = EMBEDDED_TOK_S_ESTIMATE.get(model, SLOWEST_TOK_S_ESTIMATE)
    return input_tokens / prompt_rate + output_tokens / gen_rate


def limited_seconds(calls: int, tokens: float, rpm: float | None, tpm: float | None) -> float | None:
    """The least wall time the configured limits allow (None: no rpm or tpm is set, nothing bounds it)."""
    bounds = [60.0 * calls / rpm] if rpm else []
    bounds += [60.0 * tokens / tpm] if tpm else []
    return max(bounds) if bounds else None


def needs_confirm(embedded: bool, seconds: float | None, usd: float | None) -> str | None:
    """Why this plan needs +confirm=true (one line), or None."""
    if embedded and seconds is not None and seconds > CONFIRM_EMBEDDED_S:
        return (
            f"the plan takes about {seconds / 3600:.1f} h on the embedded model (over "
            f"{CONFIRM_EMBEDDED_S / 3600:.0f} h): lower dataset.limit or generation.max_rounds, "
            "or add +confirm=true to run it"
        )
    if usd is not None and usd > CONFIRM_PAID_USD:
        return (
            f"the plan may cost up to ${usd:,.2f} (over ${CONFIRM_PAID_USD:.0f}): lower dataset.limit or "
            "generation.max_rounds, or add +confirm=true to run it"
        )
    return None
