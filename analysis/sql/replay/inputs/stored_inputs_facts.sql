-- The facts of the trajectory_inputs rows in scope (analysis.replay.stored_inputs): whether each trajectory has one row
-- (distinct hashes are distinct keys, so `true` is exact; a collision only answers `false`), the deepest one, whether
-- any call was paid in batch mode, and the generations. Filled with inputs (every row of the parts in scope) and
-- narrowed (those of the connection's scenarios).
SELECT (SELECT count(*) = count(DISTINCT hash(gen_id, scenario_id)) FROM ($inputs)),
       (SELECT coalesce(max(depth), 1) FROM ($narrowed)),
       (SELECT coalesce(bool_or(batch), false) FROM ($narrowed)),
       (SELECT coalesce(list(DISTINCT gen_id ORDER BY gen_id), []) FROM ($inputs))
