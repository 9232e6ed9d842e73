-- An expression: tau*8 + reason code of the cascade (pure SQL), from per-trajectory first-hit rounds.
-- Each signal's first halting round is found on its own (critic: crit; entropy: first t with mk[k][t] < eps;
-- no_gain: first t with gw[warmup][t] <= min_gain); least() of (round*8 + code) then picks the earliest round
-- and, on a tie, the cascade's priority (critic < entropy < no_gain < failsafe). Candidates past cap lose to
-- the failsafe at cap. NULL (unknown signal) never halts: least() skips NULLs.
least(
    CASE WHEN critic THEN crit * 8 + 1 END,
    CASE WHEN entropy AND k < depth
         THEN list_position(list_transform(mk[k], lambda v: v < eps), true) * 8 + 2 END,
    CASE WHEN gain AND warmup <= depth
         THEN list_position(list_transform(gw[warmup], lambda v: v <= min_gain), true) * 8 + 3 END,
    cap * 8 + 4)
