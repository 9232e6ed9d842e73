-- replay_inputs' trajectories from per-round signals (replay_inputs.sql's g): one row per trajectory with its depth,
-- crit and r_t (t = 1..T), round t's row as one struct (one aggregate per round instead of one per value).
-- Filled by sql.replay_inputs_sql: signals (round_signals, or its text with IS joined without the pick), per_round.
WITH x AS (
    SELECT gen_id, scenario_id, round,
           CASE WHEN distance IS NULL OR isnan(distance) OR round = 1 THEN 'inf'::DOUBLE
                ELSE distance::DOUBLE END AS d,
           CASE WHEN isnan(is_score) THEN NULL ELSE is_score::DOUBLE END AS s,
           approved AS a, writer_tokens::BIGINT AS w, critic_tokens::BIGINT AS c, judge_tokens::BIGINT AS j,
           has_answer_line AS hl, answer_em AS em, answer_f1 AS f1,
           writer_prompt_tokens::BIGINT AS wp, critic_prompt_tokens::BIGINT AS cp, judge_prompt_tokens::BIGINT AS jpr,
           writer_mode = 'batch' AS wb, critic_mode = 'batch' AS cb, judge_mode = 'batch' AS jb
    FROM $signals
)
SELECT gen_id, scenario_id, count(*)::INTEGER AS depth, min(round) FILTER (WHERE a) + 1 AS crit,
       $per_round
FROM x
GROUP BY gen_id, scenario_id
