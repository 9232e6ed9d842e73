-- Per (gen_id, split, score) of a pass/fail score (the ? parameter): what the revisions (round t - 1 -> t, t > 1)
-- did to the draft itself. A revision whose draft is the previous one word for word (the same draft_hash) is a copy,
-- not a revision: changed counts the others, and fixed / broke count only among them (changed_from_failing /
-- changed_from_passing: the changed drafts whose previous draft failed / passed). repeats: later rounds whose draft
-- is the same as ANY earlier round's of the trajectory (a verbatim repeat); distinct_per_trajectory: the mean number
-- of different drafts a trajectory holds (1 = every round the same).
WITH drafts AS (
    SELECT p.gen_id, p.split, p.score, p.scenario_id, p.round, p.passed, r.draft_hash,
           lag(p.passed) OVER w AS prev_passed, lag(r.draft_hash) OVER w AS prev_hash,
           count(*) OVER (PARTITION BY p.gen_id, p.scenario_id, p.score, r.draft_hash ORDER BY p.round
                          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) > 0 AS repeats_earlier
    FROM pass_rounds p
    JOIN rounds r ON r.gen_id::VARCHAR = p.gen_id AND r.scenario_id = p.scenario_id AND r.round = p.round
    WHERE p.score = ?
    WINDOW w AS (PARTITION BY p.gen_id, p.scenario_id, p.score ORDER BY p.round)
), revised AS (
    SELECT gen_id, split, score, count(*) AS revisions,
           count(*) FILTER (WHERE draft_hash <> prev_hash) AS changed,
           count(*) FILTER (WHERE repeats_earlier) AS repeats,
           count(*) FILTER (WHERE draft_hash <> prev_hash AND NOT prev_passed) AS changed_from_failing,
           count(*) FILTER (WHERE draft_hash <> prev_hash AND NOT prev_passed AND passed) AS fixed,
           count(*) FILTER (WHERE draft_hash <> prev_hash AND prev_passed) AS changed_from_passing,
           count(*) FILTER (WHERE draft_hash <> prev_hash AND prev_passed AND NOT passed) AS broke
    FROM drafts WHERE round > 1
    GROUP BY gen_id, split, score
), trajectories AS (
    SELECT gen_id, split, score, count(*) AS trajectories, avg(distinct_drafts) AS distinct_per_trajectory
    FROM (SELECT gen_id, split, score, scenario_id, count(DISTINCT draft_hash) AS distinct_drafts
          FROM drafts GROUP BY gen_id, split, score, scenario_id)
    GROUP BY gen_id, split, score
)
SELECT t.gen_id, t.split, t.score, t.trajectories, t.distinct_per_trajectory,
       coalesce(v.revisions, 0) AS revisions, coalesce(v.changed, 0) AS changed, coalesce(v.repeats, 0) AS repeats,
       coalesce(v.changed_from_failing, 0) AS changed_from_failing, coalesce(v.fixed, 0) AS fixed,
       coalesce(v.changed_from_passing, 0) AS changed_from_passing, coalesce(v.broke, 0) AS broke
FROM trajectories t
LEFT JOIN revised v ON v.gen_id = t.gen_id AND v.split = t.split AND v.score = t.score
ORDER BY t.gen_id, t.split, t.score
