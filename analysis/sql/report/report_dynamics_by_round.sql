-- The dynamics section: d_t, IS and approval by round (the dynamics_by_round view).
SELECT * FROM dynamics_by_round ORDER BY gen_id, round
