-- The dynamics section: revision dynamics per generation (the dynamics view).
SELECT * FROM dynamics ORDER BY gen_id
