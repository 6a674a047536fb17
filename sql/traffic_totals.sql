-- Staged rows available for each day ds in $first..$last, counted straight
-- from the staging table (an independent check of group_counts): default/other
-- traffic of the day by arm, and the random traffic whose range overlaps the
-- day's trailing window of $window_days days (arm 'all', shared by every arm).
WITH days AS (
    SELECT unnest(generate_series($first::DATE, $last::DATE, INTERVAL 1 DAY))::DATE AS day
)
SELECT d.day AS ds,
       i.traffic,
       CASE WHEN i.traffic = 'random' THEN 'all' ELSE i.arm END AS arm,
       sum(i.n)::BIGINT AS n
FROM impressions AS i JOIN days AS d
  ON (i.ds = d.day AND i.ds_start = d.day AND i.traffic <> 'random')
  OR (i.traffic = 'random' AND i.ds_start <= d.day AND i.ds >= d.day - ($window_days - 1))
GROUP BY ALL
ORDER BY ALL
