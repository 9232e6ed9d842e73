-- The judgments view: the chosen judge's rows with their token total. Filled with judge_where (sql.judge_where).
SELECT *, judge_prompt_tokens + judge_completion_tokens AS judge_tokens FROM judgments_raw WHERE $judge_where
