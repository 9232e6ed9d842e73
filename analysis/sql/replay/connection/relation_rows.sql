-- Every row of a relation registered with the connection by name (a pyarrow dataset or table):
-- analysis.replay.sources (a store's table on an object store), analysis.replay.uniqueness (the copies of a key). Filled
-- with relation (its registered name).
SELECT * FROM $relation
