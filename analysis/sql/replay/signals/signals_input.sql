-- The round_signals table of connect_signals: the registered Arrow table of given per-round signals (no store, so
-- no drafts: answer metrics unknown; no prompt tokens: costs unknown), with approved(f_t) from the given critique.
-- Filled by analysis.replay.signals.connect_signals: approved_regex.
SELECT gen_id, scenario_id, round, NULL::VARCHAR AS draft_hash, distance,
       regexp_matches(coalesce(feedback, ''), $approved_regex) AS approved, is_score,
       writer_tokens, critic_tokens, judge_tokens, NULL::VARCHAR AS judge,
       NULL::BOOLEAN AS has_answer_line, NULL::DOUBLE AS answer_em, NULL::DOUBLE AS answer_f1,
       NULL::BIGINT AS writer_prompt_tokens, NULL::BIGINT AS critic_prompt_tokens, NULL::BIGINT AS judge_prompt_tokens,
       'live' AS writer_mode, 'live' AS critic_mode, 'live' AS judge_mode
FROM signals_input
