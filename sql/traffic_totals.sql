-- Staged rows available for day $ds: default/other traffic of the day and the
-- random traffic whose range overlaps the trailing window $window_start..$ds.
SELECT traffic, count(*)::BIGINT AS n
FROM impressions
WHERE (ds = $ds AND ds_start = $ds AND traffic <> 'random')
   OR (traffic = 'random' AND ds_start <= $ds AND ds >= $window_start)
GROUP BY traffic
ORDER BY traffic
