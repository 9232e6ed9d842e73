-- The same per-round signals as signals_stored.sql, computed from the rounds rows themselves: for a store (or the
-- trajectories of one) written before the signals table, or whose signals a kill cut off. Reads every embedding.
-- Filled by sql.signals_from_rounds_sql: rounds (the relation of rounds rows), dim (embedding size),
-- approved_regex (approved(f_t) with APPROVED), markers (approval_markers.sql: the regex of each generation that
-- names its own marker), answers (answers.sql over the same rows).
-- d_t is NULL at round 1, 1.0 when either embedding has zero (or non-finite) norm, else clipped to [0, 2]:
-- shp_ray.policy.scoring.row_cosine_distances's contract (DuckDB computes the cosine in float32, so a value
-- may differ from the stored one in its last bits).
WITH r AS (
    SELECT gen_id, scenario_id, round, feedback, draft_hash,
           writer_prompt_tokens + writer_completion_tokens AS writer_tokens,
           critic_prompt_tokens + critic_completion_tokens AS critic_tokens,
           writer_prompt_tokens, critic_prompt_tokens, writer_mode, critic_mode,
           embedding::FLOAT[$dim] AS e
    FROM $rounds
), paired AS (
    SELECT * EXCLUDE (e, e_prev), array_cosine_distance(e, e_prev)::DOUBLE AS cos_d
    FROM (SELECT r.*, lag(e) OVER (PARTITION BY gen_id, scenario_id ORDER BY round) AS e_prev FROM r)
), a AS ($answers)
SELECT p.gen_id, p.scenario_id, p.round, p.draft_hash,
       CASE
           WHEN p.cos_d IS NULL THEN NULL  -- round 1: no previous draft
           -- a zero-norm (or non-finite) vector makes the cosine NaN: no evidence, 1.0
           WHEN isnan(p.cos_d) OR NOT isfinite(p.cos_d) THEN 1.0::DOUBLE
           ELSE least(2.0, greatest(0.0, p.cos_d))
       END AS distance,
       -- a constant pattern where the marker is APPROVED: compiled once, not per row
       CASE WHEN m.approved_regex IS NULL THEN regexp_matches(coalesce(p.feedback, ''), $approved_regex)
            ELSE regexp_matches(coalesce(p.feedback, ''), m.approved_regex) END AS approved,
       p.writer_tokens, p.critic_tokens, a.has_answer_line, a.answer_em, a.answer_f1,
       p.writer_prompt_tokens, p.critic_prompt_tokens, p.writer_mode, p.critic_mode
FROM paired p
LEFT JOIN a ON a.gen_id = p.gen_id AND a.scenario_id = p.scenario_id AND a.round = p.round
LEFT JOIN ($markers) m ON m.gen_id = p.gen_id
