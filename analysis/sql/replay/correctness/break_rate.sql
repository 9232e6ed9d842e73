-- Per (gen_id, split, score) of a pass/fail score: every revision (round t -> t + 1 of a trajectory, t + 1 <= its
-- depth) summed over rounds (pass_by_round.sql). break_rate: of the revisions of a passing draft, the share whose
-- next draft fails; fix_rate: of the revisions of a failing draft, the share whose next draft passes (NULL when there
-- was no such revision). net: fixed - broke, what revising does to the number of passing drafts.
SELECT gen_id, split, score, sum(from_passing + from_failing) AS revisions,
       sum(from_passing) AS from_passing, sum(broke) AS broke, sum(broke) / nullif(sum(from_passing), 0) AS break_rate,
       sum(from_failing) AS from_failing, sum(fixed) AS fixed, sum(fixed) / nullif(sum(from_failing), 0) AS fix_rate,
       sum(fixed) - sum(broke) AS net
FROM pass_by_round
WHERE round > 1
GROUP BY gen_id, split, score
ORDER BY gen_id, split, score
