-- The span of the staged rows each day of `day_files` counts
-- (sql/group_counts.sql), per day, traffic and arm: window_start = min
-- ds_start, window_end = max ds, so window_end > ds means rows that may come
-- from after the day (DESIGN §3 group_counts). A day's own rows
-- (sql/count_own_rows.sql) span the day; its random rows span its random
-- units (`day_shares`, sql/count_random_shares.sql). Kept out of
-- sql/group_counts.sql, whose rows are per cluster key: a few rows a day here.
SELECT day AS ds, traffic, arm, min(ds_start) AS window_start, max(ds) AS window_end
FROM ({{include count_own_rows}}) AS r
GROUP BY day, traffic, arm
UNION ALL
SELECT day AS ds, 'random' AS traffic, 'all' AS arm, min(ds_start) AS window_start, max(ds) AS window_end
FROM day_shares
WHERE share IS NOT NULL
GROUP BY day
