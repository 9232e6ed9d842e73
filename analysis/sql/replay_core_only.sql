-- The replay view when no policy is a family: the cascade/random/oracle rows alone.
SELECT * FROM replay_core
