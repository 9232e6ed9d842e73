-- shp-bench replay: the trajectories a connection replays.
SELECT count(*) FROM replay_inputs
