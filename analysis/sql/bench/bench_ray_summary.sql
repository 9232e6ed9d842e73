-- shp-bench replay --ray-nodes: the summary both replays are compared by (one node, and on Ray), a row per
-- generation, split and policy; $columns: every column, less the per-score map on one node (the Ray replay does
-- not combine it).
SELECT $columns FROM policy_summary ORDER BY gen_id, split, policy
