-- One judgment per draft (round_signals.sql): the lowest judge_key; the tie-breakers make the pick the same in every
-- evaluation of the view. Filled by sql.round_signals_sql: judge_metrics (METRICS).
QUALIFY row_number() OVER (PARTITION BY scenario_id, draft_hash ORDER BY judge_key, $judge_metrics,
                           judge_prompt_tokens, judge_completion_tokens) = 1
