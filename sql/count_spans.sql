-- The span of the staged rows each day of `day_files` counts
-- (sql/count_rows.sql), per day, traffic and arm: window_start = min
-- ds_start, window_end = max ds, so window_end > ds means rows that may come
-- from after the day (DESIGN §3 group_counts). Kept out of sql/group_counts.sql,
-- whose rows are per cluster key: carried on each of them, the span cost an
-- aggregate state per key row and a join of all of them (~0.5 CPU-s of 7 days
-- at K = 4,096, bench/README issue 37 item 3); here it is a few rows a day.
SELECT day AS ds, traffic, arm, min(ds_start) AS window_start, max(ds) AS window_end
FROM ({{include count_rows}}) AS r
GROUP BY ALL
