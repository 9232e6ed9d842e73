-- Whether any call the replay reads was paid in batch mode (a writer or critic call of the signals relation, or
-- a judgment of the chosen judge): only then does replay_inputs carry the batch calls' token lists
-- (replay_text.py), so a store of live calls pays nothing for them. Filled by analysis.replay.views.has_batch_calls:
-- signals (the per-round signals relation), judge_where (the chosen judge).
SELECT coalesce((SELECT bool_or(writer_mode = 'batch' OR critic_mode = 'batch') FROM ($signals)), false)
    OR coalesce((SELECT bool_or(judge_mode = 'batch') FROM judgments_raw WHERE $judge_where), false)
