-- Revision dynamics per generation: does the loop revise at all? A run whose Critic approves at
-- round 1 and whose Writer repeats its draft tells nothing about any stopping policy.
-- approved: the critique f_t starts with its generation's approval marker, APPROVED by default (round_signals).
-- round1_approval_rate: share of trajectories whose round-1 critique approved;
-- share_revised: share whose draft changes after round 1 (some later draft differs from draft 1);
-- mean_distinct_drafts: distinct drafts per trajectory (1 = frozen).
SELECT gen_id,
       count(*) AS trajectories,
       avg(approved_r1::INTEGER) AS round1_approval_rate,
       avg(approval_rounds) AS mean_approvals,
       avg((distinct_drafts > 1)::INTEGER) AS share_revised,
       avg(distinct_drafts) AS mean_distinct_drafts
FROM (
    SELECT gen_id, scenario_id,
           bool_or(round = 1 AND approved) AS approved_r1,
           count(*) FILTER (WHERE approved) AS approval_rounds,
           count(DISTINCT draft_hash) AS distinct_drafts
    FROM round_signals
    GROUP BY gen_id, scenario_id
)
GROUP BY gen_id
