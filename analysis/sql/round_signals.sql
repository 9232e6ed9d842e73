-- Per generated round: d_t, approval, tokens and EM/F1 (the signals: stored, or computed from the rounds) with
-- IS_t by the chosen judge. Filled by sql.round_signals_sql: signals (the signals relation), judge_metrics /
-- metrics (METRICS, bare / as j.<m>), judge_where, is_score (IS under the weights).
WITH j AS (
    SELECT scenario_id, draft_hash, judge, $judge_metrics,
           judge_prompt_tokens + judge_completion_tokens AS judge_tokens
    FROM judgments_raw
    WHERE $judge_where
    -- one judgment per draft; the tie-breakers make the pick the same in every evaluation of this view
    QUALIFY row_number() OVER (PARTITION BY scenario_id, draft_hash ORDER BY judge_key, $judge_metrics,
                               judge_prompt_tokens, judge_completion_tokens) = 1
)
SELECT p.gen_id, p.scenario_id, p.round, p.draft_hash, p.distance, p.approved,
       $is_score AS is_score,
       $metrics,
       p.writer_tokens, p.critic_tokens, coalesce(j.judge_tokens, 0) AS judge_tokens,
       j.judge, p.has_answer_line, p.answer_em, p.answer_f1
FROM ($signals) p
LEFT JOIN j ON j.scenario_id = p.scenario_id AND j.draft_hash = p.draft_hash
