-- The families section: how many critiques (all but each trajectory's last) have a stored embedding.
SELECT count(*) FILTER (WHERE g IS NOT NULL) AS known, count(*) AS n
FROM (SELECT unnest(fb_embs[1:len(fb_embs) - 1]) AS g FROM family_inputs)
