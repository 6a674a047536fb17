-- Staged rows available for each day ds in $first..$last, counted straight
-- from the staging table (an independent check of group_counts): default/other
-- traffic of the day by arm, and the random traffic of the day's trailing
-- window of $window_days days under $pool_policy, as sql/group_counts.sql
-- defines it (arm 'all', shared by every arm).
SELECT f.day AS ds,
       i.traffic,
       CASE WHEN i.traffic = 'random' THEN 'all' ELSE i.arm END AS arm,
       sum(i.n)::BIGINT AS n
FROM impressions AS i JOIN day_files AS f
  ON i.src_file = f.file
 AND ((i.ds = f.day AND i.ds_start = f.day AND i.traffic <> 'random')
      OR (i.traffic = 'random' AND i.ds_start <= f.day AND i.ds >= f.day - ($window_days - 1)
          AND ($pool_policy = 'overlap' OR (i.ds_start >= f.day - ($window_days - 1) AND i.ds <= f.day))))
GROUP BY ALL
ORDER BY ALL
