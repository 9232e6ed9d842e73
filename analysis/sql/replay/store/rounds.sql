-- The rounds view: the per-round signals beside the stored draft and latencies, and whether the draft is right
-- (has_answer_line, answer_em, answer_f1 against the scenario's gold answer), and how each call was paid (live | batch).
SELECT s.gen_id, s.scenario_id, s.round, r.draft, r.feedback, s.draft_hash, s.approved,
       s.distance, s.is_score, s.faithfulness, s.answer_relevancy, s.context_precision, s.context_recall,
       s.writer_tokens, s.critic_tokens, s.judge_tokens, s.judge, r.writer_latency_s, r.critic_latency_s,
       s.has_answer_line, s.answer_em, s.answer_f1, s.writer_mode, s.critic_mode, s.judge_mode
FROM round_signals s JOIN round_parts r
ON r.gen_id = s.gen_id AND r.scenario_id = s.scenario_id AND r.round = s.round
