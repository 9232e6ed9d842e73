-- After a kept replay_inputs file failed its check once attached (analysis.replay.derived): its view and attachment go,
-- so the connection builds replay_inputs as if it had never found one.
DROP VIEW IF EXISTS replay_inputs;
DETACH DATABASE IF EXISTS kept_inputs
