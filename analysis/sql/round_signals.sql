-- Per generated round: d_t (DuckDB array cosine distance), IS_t, tokens, f_t. Filled by sql.round_signals_sql:
-- dim (embedding size), judge_metrics / metrics (METRICS, bare / as j.<m>), judge_where, is_score (IS under the weights).
-- d_t is NULL at round 1, 1.0 when either embedding has zero (or non-finite) norm, else clipped to [0, 2]:
-- shp_ray.policy.scoring.cosine_distance's contract.
WITH r AS (
    SELECT gen_id, scenario_id, round, feedback, draft_hash,
           writer_prompt_tokens + writer_completion_tokens AS writer_tokens,
           critic_prompt_tokens + critic_completion_tokens AS critic_tokens,
           embedding::FLOAT[$dim] AS e
    FROM round_parts
), paired AS (
    SELECT * EXCLUDE (e, e_prev), array_cosine_distance(e, e_prev)::DOUBLE AS cos_d
    FROM (SELECT r.*, lag(e) OVER (PARTITION BY gen_id, scenario_id ORDER BY round) AS e_prev FROM r)
), j AS (
    SELECT scenario_id, draft_hash, judge, $judge_metrics,
           judge_prompt_tokens + judge_completion_tokens AS judge_tokens
    FROM judgments_raw
    WHERE $judge_where
    QUALIFY row_number() OVER (PARTITION BY scenario_id, draft_hash ORDER BY judge_key) = 1
)
SELECT p.gen_id, p.scenario_id, p.round, p.draft_hash, p.feedback,
       CASE
           WHEN p.cos_d IS NULL THEN NULL  -- round 1: no previous draft
           -- a zero-norm (or non-finite) vector makes the cosine NaN: no evidence, 1.0
           WHEN isnan(p.cos_d) OR NOT isfinite(p.cos_d) THEN 1.0::DOUBLE
           ELSE least(2.0, greatest(0.0, p.cos_d))
       END AS distance,
       $is_score AS is_score,
       $metrics,
       p.writer_tokens, p.critic_tokens, coalesce(j.judge_tokens, 0) AS judge_tokens,
       j.judge
FROM paired p
LEFT JOIN j ON j.scenario_id = p.scenario_id AND j.draft_hash = p.draft_hash
