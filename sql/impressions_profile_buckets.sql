-- The profile of sql/impressions_profile.sql and, from the same scan, the
-- rows per cluster bucket that the cluster-robust variance needs
-- (transforms/reo/cluster.py), as two grouping sets of one aggregation:
-- * ({{columns}}, __y): the profile itself, exactly as without clustering,
--   with the label of its signals (__y, a function of them: no more rows;
--   __cbucket NULL);
-- * ({{bucket_columns}}, __y, __cbucket): rows per combination of file, day,
--   traffic, arm and attributes, label and bucket (the signals NULL).
-- The bucket rows carry their combination's own columns. A 64-bit hash of
-- them in their place (mapped back from the profile rows in Polars) is
-- cheaper with few combinations, but with thousands of groups (nearly a
-- bucket row per staged row) the map back costs more than the hash saves
-- (bench/README.md).
-- `raw` holds the rows with __cbucket (sql/impressions_bucket.sql). __y is the
-- label rule over the signals ({{signals:bool}}, numeric or boolean
-- columns): `true IN (...)` is SQL's three-valued OR of them (any), and
-- `NOT (false IN (...))` their AND (all), as Polars' any/all_horizontal that
-- transforms/contract.py applies to the profile; the staging step checks
-- that this label is the contract's on every profile row and that both sets
-- give the same rows per label (contract.bucket_rows).
-- Splitting the profile itself by bucket instead multiplies its groups by the
-- signal combinations, and costs more than the two sets (bench/README.md).
-- DuckDB only (adapters.profile_rows): its label needs boolean or numeric signals.
-- No ORDER BY: the profile proper is sorted by first row where it is taken
-- (contract.profile_part, on ~a quarter of the rows at K = 4,096), and the
-- bucket rows need no order (they are staged and summed; their values are
-- checked on the profile proper first); sorting every row here would cost
-- more than sorting the profile proper there.
SELECT {{columns}},
       __y,
       __cbucket,
       CAST(count(*) AS BIGINT) AS __n,
       CAST(min(__row) AS BIGINT) + 1 AS __first_row
FROM (
    SELECT *,
           CASE WHEN $label_all THEN NOT (false IN ({{signals:bool}})) ELSE true IN ({{signals:bool}}) END AS __y
    FROM raw
)
GROUP BY GROUPING SETS (({{columns}}, __y), ({{bucket_columns}}, __y, __cbucket))
