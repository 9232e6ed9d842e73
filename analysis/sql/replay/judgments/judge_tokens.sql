-- How many tokens the chosen judge's judgments used in all (0: it makes no call, like the lexical judge, so it
-- costs $0 whatever the price table says). Filled by analysis.replay.costs: judge_where (the chosen judge).
SELECT coalesce(sum(judge_prompt_tokens + judge_completion_tokens), 0) FROM judgments_raw WHERE $judge_where
