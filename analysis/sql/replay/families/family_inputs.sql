-- Per trajectory: the lists the family executor reads (critique embedding NULL where unknown).
-- Filled by sql.family_inputs_sql: dim (embedding size).
WITH gens AS (SELECT gen_id, any_value(embedder) AS embedder FROM generations GROUP BY gen_id),
fe AS (
    SELECT embedder, text_hash, any_value(embedding)::FLOAT[] AS g FROM feedback_embeddings GROUP BY ALL
),
ctx AS (SELECT scenario_id, any_value(contexts) AS contexts FROM scenarios GROUP BY scenario_id),
r AS (
    SELECT r.gen_id, r.scenario_id, r.round, coalesce(r.draft, '') AS draft,
           r.embedding::FLOAT[$dim]::FLOAT[] AS e, fe.g,
           r.writer_prompt_tokens + r.writer_completion_tokens AS wt,
           r.critic_prompt_tokens + r.critic_completion_tokens AS ct
    FROM round_parts r
    LEFT JOIN gens ON gens.gen_id = r.gen_id
    LEFT JOIN fe ON fe.embedder = gens.embedder AND fe.text_hash = sha256(coalesce(r.feedback, ''))
)
SELECT r.gen_id, r.scenario_id,
       list(draft ORDER BY round) AS drafts, list(e ORDER BY round) AS embs, list(g ORDER BY round) AS fb_embs,
       list(wt::BIGINT ORDER BY round) AS wt, list(ct::BIGINT ORDER BY round) AS ct,
       coalesce(any_value(ctx.contexts), []::VARCHAR[]) AS contexts
FROM r LEFT JOIN ctx ON ctx.scenario_id = r.scenario_id
GROUP BY r.gen_id, r.scenario_id
