-- Every policy x every trajectory in one query (cascade, random, oracle), with the answer metrics of the returned
-- draft (final_has_answer_line, final_em, final_f1). Filled by sql.replay_sql:
-- knobs (the policy's cascade knobs but max_rounds, cascade.KNOBS: its cap is least(max_rounds, depth)),
-- code (cascade_code.sql or cascade_udf_code.sql), reasons (WHEN code THEN reason, from REASON_CODES), costs (the
-- tokens in US dollars with the same judge charge as operational_tokens, read from replay_inputs' per-round
-- dollars: cost_text.cost_columns_sql).
-- The per-round values at a row's round are replay_inputs' lists indexed (lt[paid], s[stop_round] ...): a row
-- pays the loop and the judge to round paid and returns round stop_round's judgment.
WITH pt AS (
    SELECT p.policy, p.kind, p.consults_is, p.seed, $knobs, least(p.max_rounds, x.depth) AS cap, x.*
    FROM policies p CROSS JOIN replay_inputs x
    WHERE p.kind IN ('cascade', 'random', 'oracle')  -- the other families: family_replay.sql
), decided AS (
    SELECT *,
           CASE kind
               WHEN 'cascade' THEN $code
               WHEN 'random' THEN
                   (('0x' || left(sha256(seed::VARCHAR || ':' || scenario_id), 15))::BIGINT % cap + 1) * 8
               ELSE CASE WHEN list_max(s[1:cap]) IS NULL THEN 1
                         ELSE list_position(s[1:cap], list_max(s[1:cap])) END * 8
           END AS code
    FROM pt
), stopped AS (
    SELECT *, code // 8 AS stop_round, CASE WHEN kind = 'oracle' THEN cap ELSE code // 8 END AS paid
    FROM decided
)
SELECT policy, gen_id, scenario_id, stop_round::INTEGER AS stop_round,
       CASE kind WHEN 'cascade' THEN CASE code % 8 $reasons END WHEN 'random' THEN 'random' ELSE 'oracle' END
           AS reason,
       (lt[paid] + CASE WHEN consults_is THEN cj[paid] ELSE 0 END)::BIGINT AS operational_tokens,
       j[stop_round]::BIGINT AS evaluation_tokens,
       $costs,
       s[stop_round] AS final_is,
       depth, baseline_tokens, baseline_is, baseline_em, baseline_f1,
       hl[stop_round] AS final_has_answer_line, em[stop_round] AS final_em, f1[stop_round] AS final_f1
FROM stopped
