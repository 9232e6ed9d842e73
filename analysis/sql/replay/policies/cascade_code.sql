-- An expression: tau*8 + reason code of the cascade (pure SQL) over one replay_inputs row and one policy.
-- Each signal's first halting round is found on its own (critic: crit; entropy: the first t > k, t <= depth with
-- m<k>_<t> < eps; no_gain: the first t >= max(warmup, 2), t <= depth with g_t <= min_gain); least() of
-- (round*8 + code) then picks the earliest round and, on a tie, the cascade's priority (critic < entropy <
-- no_gain < failsafe). Candidates past cap lose to the failsafe at cap. NULL (unknown signal) never halts:
-- least() skips NULLs. Filled by sql.cascade_code_sql: entropy_hit, gain_hit (CASE chains over t = 1..T) and each
-- reason's code (critic, entropy, no_gain, failsafe: sql.REASON_CODES).
least(
    CASE WHEN critic THEN crit * 8 + $critic END,
    CASE WHEN entropy AND k < depth THEN ($entropy_hit) * 8 + $entropy END,
    CASE WHEN gain AND warmup <= depth THEN ($gain_hit) * 8 + $no_gain END,
    cap * 8 + $failsafe)
