-- Does the judge's IS rank a question's rounds as answer F1 does? Within each question, Spearman's rho between
-- IS_t and answer F1_t (lenient reading) over its rounds (average ranks for ties), then the mean over the
-- questions where both vary (rho is undefined where F1 or IS is the same every round: such a question has no
-- order to agree with). Near 0: IS does not tell a better round of a question from a worse one.
WITH x AS (
    SELECT r.scenario_id, r.is_score AS is_t, a.answer_f1 AS f1,
           count(*) OVER (PARTITION BY r.scenario_id) AS n
    FROM round_signals r
    JOIN answers_lenient a USING (gen_id, scenario_id, round)
    WHERE NOT isnan(r.is_score)
), ranked AS (
    SELECT scenario_id,
           (rank() OVER (PARTITION BY scenario_id ORDER BY is_t) + n + 1
            - rank() OVER (PARTITION BY scenario_id ORDER BY is_t DESC)) / 2 AS r_is,
           (rank() OVER (PARTITION BY scenario_id ORDER BY f1) + n + 1
            - rank() OVER (PARTITION BY scenario_id ORDER BY f1 DESC)) / 2 AS r_f1
    FROM x
), per_question AS (
    SELECT scenario_id, corr(r_is, r_f1) AS rho FROM ranked GROUP BY scenario_id
)
SELECT count(*) AS questions,
       count(*) FILTER (WHERE NOT isnan(rho)) AS defined,
       avg(rho) FILTER (WHERE NOT isnan(rho)) AS mean_rho
FROM per_question
