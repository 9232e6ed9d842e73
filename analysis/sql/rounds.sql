-- The rounds view: the per-round signals beside the stored draft and latencies, and whether the draft is right
-- (answers.sql: has_answer_line, answer_em, answer_f1 against the scenario's gold answer).
SELECT s.gen_id, s.scenario_id, s.round, r.draft, s.feedback, s.draft_hash,
       s.distance, s.is_score, s.faithfulness, s.answer_relevancy, s.context_precision, s.context_recall,
       s.writer_tokens, s.critic_tokens, s.judge_tokens, s.judge, r.writer_latency_s, r.critic_latency_s,
       a.has_answer_line, a.answer_em, a.answer_f1
FROM round_signals s JOIN round_parts r
ON r.gen_id = s.gen_id AND r.scenario_id = s.scenario_id AND r.round = s.round
LEFT JOIN answers a ON a.gen_id = s.gen_id AND a.scenario_id = s.scenario_id AND a.round = s.round
