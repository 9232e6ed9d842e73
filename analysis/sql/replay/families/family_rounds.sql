-- Per round, in the store's own order: what the column-wise family executor reads (analysis.replay.family_stream checks
-- that each trajectory's rounds come together and in order, else reads family_rounds_sorted.sql). A projection of
-- round_parts alone, no join: a join may reorder rows, a scan keeps the store's order. fh: the hash the critique's
-- embedding is stored under (feedback_embeddings.text_hash, looked up by family_critiques.sql's rows). Filled by
-- sql.family_rounds_sql: dim (embedding size).
SELECT gen_id, scenario_id, round, coalesce(draft, '') AS draft, embedding::FLOAT[$dim] AS e,
       sha256(coalesce(feedback, '')) AS fh,
       coalesce(writer_prompt_tokens + writer_completion_tokens, 0)::BIGINT AS wt,
       coalesce(critic_prompt_tokens + critic_completion_tokens, 0)::BIGINT AS ct
FROM round_parts
