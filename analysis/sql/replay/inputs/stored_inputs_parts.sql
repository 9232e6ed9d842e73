-- What the store's trajectory_inputs rows in scope name (analysis.replay.stored_inputs): per set of parts they were read
-- from, how many rows, with the judge and versions they were written under. Filled with inputs (their rows).
SELECT rounds_part, signals_part, judgments_part, rounds_part_trajectories, judge, judge_prompt_version,
       signals_version, inputs_version, count(*)
FROM ($inputs)
GROUP BY ALL
