-- Staged rows available for day $ds, counted straight from the staging table
-- (an independent check of group_counts): default/other traffic of the day by
-- arm, and the random traffic whose range overlaps the window $window_start..$ds
-- (arm 'all', shared by every arm).
SELECT traffic,
       CASE WHEN traffic = 'random' THEN 'all' ELSE arm END AS arm,
       sum(n)::BIGINT AS n
FROM impressions
WHERE (ds = $ds AND ds_start = $ds AND traffic <> 'random')
   OR (traffic = 'random' AND ds_start <= $ds AND ds >= $window_start)
GROUP BY ALL
ORDER BY ALL
