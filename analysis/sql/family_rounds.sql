-- Per round, trajectory by trajectory and in round order: what the column-wise family executor reads
-- (analysis.family_replay streams it). One row a round, no per-trajectory list: the embeddings arrive as one
-- fixed-size block the executor reads without a copy. g: the embedding of the round's critique f_t (NULL where
-- unknown; the executor pairs it with round t + 1). The scenario's contexts ride on every row (read once per
-- trajectory). Filled by sql.family_rounds_sql: dim (embedding size).
WITH gens AS (SELECT gen_id, any_value(embedder) AS embedder FROM generations GROUP BY gen_id),
fe AS (
    SELECT embedder, text_hash, any_value(embedding)::FLOAT[] AS g FROM feedback_embeddings GROUP BY ALL
),
ctx AS (SELECT scenario_id, any_value(contexts) AS contexts FROM scenarios GROUP BY scenario_id)
SELECT r.gen_id, r.scenario_id, r.round, coalesce(r.draft, '') AS draft, r.embedding::FLOAT[$dim] AS e, fe.g,
       coalesce(r.writer_prompt_tokens + r.writer_completion_tokens, 0)::BIGINT AS wt,
       coalesce(r.critic_prompt_tokens + r.critic_completion_tokens, 0)::BIGINT AS ct,
       coalesce(ctx.contexts, []::VARCHAR[]) AS contexts
FROM round_parts r
LEFT JOIN gens ON gens.gen_id = r.gen_id
LEFT JOIN fe ON fe.embedder = gens.embedder AND fe.text_hash = sha256(coalesce(r.feedback, ''))
LEFT JOIN ctx ON ctx.scenario_id = r.scenario_id
ORDER BY r.gen_id, r.scenario_id, r.round
