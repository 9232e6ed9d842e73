-- The copies of a store table's keys (analysis.replay.uniqueness) with a noisy float column snapped to one value per key
-- when its copies differ by no more than the tolerance: two copies that differ only so are one row, and one that
-- differs by more is still a contradiction. Filled with copies (the rows), keys (the key columns), column (the
-- noisy one) and tolerance (a SQL double). NULLs stay NULL (d_t at round 1).
SELECT * REPLACE (
    CASE WHEN max($column) OVER w - min($column) OVER w <= $tolerance THEN min($column) OVER w ELSE $column END
        AS $column
)
FROM ($copies)
WINDOW w AS (PARTITION BY $keys)
