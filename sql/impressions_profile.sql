-- Distinct-value profile of impressions rows, registered as `raw` (the rows
-- plus __row, the 0-based file row, and __file when it holds several files):
-- one scan grouping by the contract columns present ({{columns}}: __file, ds,
-- traffic, arm, signals, attributes, envy flags, __cbucket). One row per
-- distinct combination, with the rows it stands for (__n) and its first file
-- row (__first_row). The data-quality suite and the staging step work on this
-- profile, never on the rows as Python objects.
-- Portable (pipelines/storage/portable.py): DuckDB runs it as written, Spark
-- as translated by sqlglot.
SELECT {{columns}},
       CAST(count(*) AS BIGINT) AS __n,
       CAST(min(__row) AS BIGINT) + 1 AS __first_row
FROM raw
GROUP BY {{columns}}
