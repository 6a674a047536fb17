-- Staged rows available for each day ds of the registered frame `day_files`
-- (day DATE, file VARCHAR), counted straight from the staging table (an
-- independent check of group_counts): default/other traffic of the day by
-- arm, and the random traffic of the day's trailing window of $window_days
-- days under $pool_policy, as sql/group_counts.sql defines it (arm 'all',
-- shared by every arm). Each file's rows are first summed per traffic, arm
-- and dates (what the window rule reads), so a pool that serves many days is
-- read once, not once a day (integer sums: the same totals).
WITH staged AS (
    SELECT src_file, traffic, arm, ds_start, ds, sum(n) AS n
    FROM impressions
    WHERE src_file IN (SELECT file FROM day_files)
    GROUP BY ALL
)
SELECT f.day AS ds,
       i.traffic,
       CASE WHEN i.traffic = 'random' THEN 'all' ELSE i.arm END AS arm,
       sum(i.n)::BIGINT AS n
FROM staged AS i JOIN day_files AS f
  ON i.src_file = f.file
 AND ((i.ds = f.day AND i.ds_start = f.day AND i.traffic <> 'random')
      OR (i.traffic = 'random' AND i.ds_start <= f.day AND i.ds >= f.day - ($window_days - 1)
          AND ($pool_policy = 'overlap' OR (i.ds_start >= f.day - ($window_days - 1) AND i.ds <= f.day))))
GROUP BY ALL
ORDER BY ALL
