-- Per-key counts of random traffic (sql/count_keys.sql), once per share of
-- the registered frame `count_units` (share INTEGER, rehashed BOOLEAN,
-- src_file VARCHAR, ds_start DATE, ds DATE): the rows of the units each
-- share lists. A share is any set of units counted together: the days that
-- count the same random rows (sql/count_random_shares.sql; count_statements),
-- or one unit under its rehash flag (range_counts.unit_ids; count_batch,
-- which gives each day its units' rows, so a pooled random row is counted
-- once for all the days whose window it serves, not once per day or per
-- set of pools). Random traffic is shared by all arms (arm = 'all', DESIGN
-- §2 "Random-traffic windows"). ds is null.
WITH counted AS (
    SELECT NULL::DATE AS ds, u.share, i.traffic, 'all' AS arm, i.y, i.n, i.cbucket, u.rehashed,
           COLUMNS('^attr__')
    FROM impressions AS i
    JOIN count_units AS u ON i.src_file = u.src_file AND i.ds_start = u.ds_start AND i.ds = u.ds
    WHERE i.traffic = 'random'
)
{{include count_keys}}
