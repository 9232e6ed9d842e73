-- Which judges (and prompt versions) scored the store, with their row counts (analysis.replay.views.pick_judge).
SELECT judge, judge_prompt_version, count(*) FROM judgments_raw GROUP BY ALL ORDER BY 1, 2
