-- The profile of sql/impressions_profile.sql and, from the same scan, the
-- rows per cluster bucket that the cluster-robust variance needs
-- (transforms/reo/cluster.py, issue 20), as two grouping sets of one aggregation:
-- * ({{columns}}, __h): the profile itself, exactly as without clustering
--   (__y and __cbucket NULL), with __h, the 64-bit hash of its
--   {{bucket_columns}} (file, day, traffic, arm, attributes);
-- * (__h, __y, __cbucket): rows per combination of those, label and bucket
--   (the profile's columns NULL; profile_rows maps __h back to them from the
--   profile rows, and redoes the scan the old way if two combinations share
--   a hash). An integer key in place of the strings makes this set ~15 %
--   cheaper at 10^8 rows.
-- `raw` holds the rows with __cbucket (sql/impressions_bucket.sql). __y is the
-- label rule over the signals ({{signals:bool}}, numeric or boolean
-- columns): `true IN (...)` is SQL's three-valued OR of them (any), and
-- `NOT (false IN (...))` their AND (all), as Polars' any/all_horizontal that
-- transforms/contract.py applies to the profile; the staging step checks
-- that both sets give the same rows per label (contract.bucket_rows).
-- Splitting the profile itself by bucket instead multiplies its groups by the
-- signal combinations (8.7x more rows out at 10^8): 2.4x the unclustered scan
-- at 10^8 rows against 1.74x for the two sets (bench/README.md, issue 20).
-- DuckDB only (adapters.profile_rows): Spark's hash() has 32 bits.
SELECT {{columns}},
       __h,
       __y,
       __cbucket,
       CAST(count(*) AS BIGINT) AS __n,
       CAST(min(__row) AS BIGINT) + 1 AS __first_row
FROM (
    SELECT *,
           hash({{bucket_columns}}) AS __h,
           CASE WHEN $label_all THEN NOT (false IN ({{signals:bool}})) ELSE true IN ({{signals:bool}}) END AS __y
    FROM raw
)
GROUP BY GROUPING SETS (({{columns}}, __h), (__h, __y, __cbucket))
