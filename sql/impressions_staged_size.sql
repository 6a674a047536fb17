-- Size of the impressions staging table: its rows (profile and bucket rows,
-- not logged rows) and the days they hold, from which count_range
-- (pipelines/ingest/range_counts.py) sizes the days it counts in one
-- statement of sql/group_counts.sql.
SELECT count(*)::BIGINT AS n_rows, count(DISTINCT ds)::BIGINT AS n_days
FROM impressions
