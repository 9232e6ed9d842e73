-- Per generated round: d_t, approval, tokens and EM/F1 (the signals: stored, or computed from the rounds) with
-- IS_t by the chosen judge, and what each call's cost needs: its prompt tokens (input and output are priced
-- apart) and how it was paid (mode: live | batch; an unjudged round has no judge call: 0 tokens, live).
-- Filled by sql.round_signals_sql: signals (the signals relation), judge_metrics / metrics (METRICS, bare /
-- as j.<m>), judge_where, is_score (IS under the weights), pick (judgment_pick.sql: one judgment per draft; empty
-- where the judge has at most one per draft, judgments_unique.sql, which spares the window over every judgment).
WITH j AS (
    SELECT scenario_id, draft_hash, judge, $judge_metrics,
           judge_prompt_tokens + judge_completion_tokens AS judge_tokens, judge_prompt_tokens, judge_mode
    FROM judgments_raw
    WHERE $judge_where
    $pick
)
SELECT p.gen_id, p.scenario_id, p.round, p.draft_hash, p.distance, p.approved,
       $is_score AS is_score,
       $metrics,
       p.writer_tokens, p.critic_tokens, coalesce(j.judge_tokens, 0) AS judge_tokens,
       j.judge, p.has_answer_line, p.answer_em, p.answer_f1,
       p.writer_prompt_tokens, p.critic_prompt_tokens, coalesce(j.judge_prompt_tokens, 0) AS judge_prompt_tokens,
       p.writer_mode, p.critic_mode, coalesce(j.judge_mode, 'live') AS judge_mode
FROM ($signals) p
LEFT JOIN j ON j.scenario_id = p.scenario_id AND j.draft_hash = p.draft_hash
