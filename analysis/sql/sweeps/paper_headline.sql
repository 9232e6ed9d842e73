-- The shipped run's headline (sweeps.paper_headline): test split, the connection's judge, lenient answer F1
-- paired against fixed_k6's last draft. README.md prints this query as is (tests/test_paper_headline.py).
SELECT r.policy, count(*) AS n, round(avg(r.stop_round), 2) AS rounds,
       round(1 - sum(r.operational_tokens) / sum(r.baseline_tokens), 2) AS saving,
       round(avg(r.final_is - r.baseline_is), 3) AS delta_is,
       round(avg(a.answer_f1 - b.answer_f1), 3) AS delta_f1
FROM replay r JOIN scenarios s USING (scenario_id)
JOIN answers_lenient a ON a.scenario_id = r.scenario_id AND a.round = r.stop_round
JOIN answers_lenient b ON b.scenario_id = r.scenario_id AND b.round = r.depth
WHERE s.split = 'test' AND r.policy IN ('fixed_k1', 'entropy_only', 'shp', 'fixed_k6', 'oracle_is')
GROUP BY r.policy ORDER BY saving DESC
