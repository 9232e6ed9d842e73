-- analysis.stats.gain_fit: the family inputs and IS_t of the trajectories of one split (the ? parameter) to fit on.
SELECT fi.scenario_id, fi.drafts, fi.embs, fi.fb_embs, fi.wt, fi.ct, fi.contexts, x.s
FROM family_inputs fi JOIN trajectories x USING (gen_id, scenario_id)
WHERE fi.scenario_id IN (SELECT scenario_id FROM scenarios WHERE split = ?) ORDER BY fi.scenario_id
