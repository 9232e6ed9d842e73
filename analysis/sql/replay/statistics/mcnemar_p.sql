-- The exact two-sided McNemar p of discordant counts $b and $c (expressions): the binomial test of b successes in
-- b + c trials at 1/2, 2 * P(X <= min(b, c)) capped at 1 (scipy.stats.binomtest's two-sided p at 1/2), the
-- binomial terms through lgamma; 1 when b + c = 0. analysis.stats.correctness holds it equal to scipy's.
CASE WHEN ($b) + ($c) = 0 THEN 1.0::DOUBLE
     ELSE least(1.0, 2 * list_sum([exp(lgamma(($b) + ($c) + 1) - lgamma(k + 1) - lgamma(($b) + ($c) - k + 1)
                                       - (($b) + ($c)) * ln(2)) for k in range(0, least($b, $c) + 1)]))
END
