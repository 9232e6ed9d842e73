-- The stored per-round signals (the signals table, written with the rounds), of the current signals_version:
-- what round_signals reads when every trajectory has them, so opening a store reads no embedding.
-- Filled by sql.signals_stored_sql: version (shp_ray.policy.round_signals.SIGNALS_VERSION).
-- writer/critic prompt tokens and modes are NULL in rows stored before signals carried them (signals_calls_fill.sql
-- then takes them from the rounds).
SELECT gen_id, scenario_id, round, draft_hash, distance, approved, writer_tokens, critic_tokens,
       has_answer_line, answer_em, answer_f1,
       writer_prompt_tokens, critic_prompt_tokens, writer_mode, critic_mode
FROM signals_raw
WHERE signals_version = $version
