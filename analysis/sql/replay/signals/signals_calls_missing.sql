-- Whether any stored signals row of the relation lacks the prompt tokens or call modes (stored before signals
-- carried them): then round_signals reads them from the rounds (signals_calls_fill.sql). Filled by
-- analysis.replay.views.signals_lack_calls: signals (the stored signals relation).
SELECT count(*) > 0 FROM ($signals)
WHERE writer_prompt_tokens IS NULL OR critic_prompt_tokens IS NULL OR writer_mode IS NULL OR critic_mode IS NULL
