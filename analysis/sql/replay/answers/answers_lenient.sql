-- Per draft, the LENIENT reading of its answer (shp_ray.policy.answer.lenient_answer_scores, equal bit for bit):
-- an "Answer:" / "Final answer:" anywhere in a line counts (the text after the first marker of the LAST line that
-- has one); a draft with no marker at all is read by its last sentence (split on ./!/? followed by whitespace and on
-- line breaks), so a right answer stated inline is not scored 0 as the strict reading (answers.sql) scores it.
-- Filled by sql.answers_lenient_sql: rounds (the relation of rounds rows), inline (INLINE_ANSWER: a marker and the
-- rest of its line), sentence_break, visible (regexes), norm_answer / norm_gold (answer_normalize.sql), counted
-- (answer_tokens.sql), f1 (answer_token_f1.sql).
-- has_inline_answer: a marker gave the answer (else the last sentence did). EM / F1 as answers.sql scores them,
-- NULL for a scenario without a gold answer.
WITH gold AS (
    SELECT scenario_id, any_value(ground_truth) AS ground_truth FROM scenarios GROUP BY scenario_id
), read AS (
    SELECT r.gen_id, r.scenario_id, r.round, g.ground_truth,
           regexp_extract_all(coalesce(r.draft, ''), $inline, 1) AS inline,
           list_filter(regexp_split_to_array(coalesce(r.draft, ''), $sentence_break),
                       lambda s: regexp_matches(s, $visible)) AS sentences
    FROM $rounds r LEFT JOIN gold g ON g.scenario_id = r.scenario_id
), picked AS (
    SELECT gen_id, scenario_id, round, ground_truth, len(inline) > 0 AS has_inline_answer,
           CASE WHEN len(inline) > 0 THEN inline[-1] ELSE coalesce(sentences[-1], '') END AS answer
    FROM read
), normalised AS (
    SELECT *, $norm_answer AS pred, $norm_gold AS ref FROM picked
), $counted
SELECT gen_id, scenario_id, round, answer, has_inline_answer,
       CASE WHEN ground_truth IS NULL THEN NULL ELSE (pred = ref)::INTEGER::DOUBLE END AS answer_em,
       CASE WHEN ground_truth IS NULL THEN NULL ELSE $f1 END AS answer_f1
FROM counted
