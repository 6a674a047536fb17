-- With [envy] (DESIGN §4.7): the default-, swap- and random-traffic rows of
-- one impressions file (random rows only say which group their user is in,
-- for swap rows whose donor is that user), registered as `raw` (rows plus __row), grouped by the
-- contract columns present ({{columns}}: ds, traffic, arm, signals,
-- attributes, user_id, policy_user_id, policy_group): one row per user ×
-- serving policy × distinct signal values, with the rows it stands for (__n)
-- and its first file row (__first_row). Parsed like a profile
-- (transforms/contract.py) and summed per user and donor into the envy_rows
-- staging table. Portable (pipelines/storage/portable.py).
SELECT {{columns}},
       CAST(count(*) AS BIGINT) AS __n,
       CAST(min(__row) AS BIGINT) + 1 AS __first_row
FROM raw
WHERE lower(trim(CAST(traffic AS VARCHAR))) IN ('default', 'swap', 'random')
GROUP BY {{columns}}
