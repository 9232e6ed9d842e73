-- Per draft: is it right? HotpotQA's exact match and token F1 against the scenario's gold answer
-- (scenarios.ground_truth), as shp_ray.policy.answer.answer_scores computes them (the generation stores the
-- Python values in the signals table; this is the same in SQL for rounds without them). Filled by
-- sql.answers_sql: rounds (the relation of rounds rows), answer_line (regex of a line that starts with
-- "Answer:" / "Final answer:"), norm_answer / norm_gold (answer_normalize.sql over answer / ground_truth),
-- counted (answer_tokens.sql), f1 (answer_token_f1.sql).
-- The LAST answer line counts; a draft without one scores 0 (has_answer_line says which). A scenario without
-- a gold answer scores NULL (unknown, never 0).
WITH gold AS (
    SELECT scenario_id, any_value(ground_truth) AS ground_truth FROM scenarios GROUP BY scenario_id
), lines AS (
    SELECT r.gen_id, r.scenario_id, r.round, g.ground_truth,
           list_filter(string_split(coalesce(r.draft, ''), chr(10)), lambda l: regexp_matches(l, $answer_line))[-1]
               AS line
    FROM $rounds r LEFT JOIN gold g ON g.scenario_id = r.scenario_id
), normalised AS (
    SELECT gen_id, scenario_id, round, ground_truth, line IS NOT NULL AS has_answer_line,
           $norm_answer AS pred, $norm_gold AS ref
    FROM (SELECT *, regexp_replace(line, $answer_line, '') AS answer FROM lines)
), $counted
SELECT gen_id, scenario_id, round, has_answer_line,
       CASE WHEN ground_truth IS NULL THEN NULL
            WHEN NOT has_answer_line THEN 0::DOUBLE
            ELSE (pred = ref)::INTEGER::DOUBLE END AS answer_em,
       CASE WHEN ground_truth IS NULL THEN NULL
            WHEN NOT has_answer_line THEN 0::DOUBLE
            ELSE $f1 END AS answer_f1
FROM counted
