-- The signals relation with the prompt tokens and call modes of rows stored before signals carried them (their
-- NULLs) taken from the rounds themselves, so every round is priced exactly; the rounds' mode of a store written
-- before modes existed reads 'live' (added_columns.sql). Used only while such rows exist: a store written since
-- reads no rounds part here. Filled by sql.signals_calls_fill_sql: signals (the signals relation).
SELECT s.* REPLACE (coalesce(s.writer_prompt_tokens, r.writer_prompt_tokens) AS writer_prompt_tokens,
                    coalesce(s.critic_prompt_tokens, r.critic_prompt_tokens) AS critic_prompt_tokens,
                    coalesce(s.writer_mode, r.writer_mode) AS writer_mode,
                    coalesce(s.critic_mode, r.critic_mode) AS critic_mode)
FROM ($signals) s
LEFT JOIN (SELECT gen_id, scenario_id, round, writer_prompt_tokens, critic_prompt_tokens, writer_mode, critic_mode
           FROM round_parts) r
ON r.gen_id = s.gen_id AND r.scenario_id = s.scenario_id AND r.round = s.round
