-- sql/impressions_donor_flag.sql for a file with neither policy_user_id nor
-- policy_group: every swap row lacks its donor. Portable
-- (pipelines/storage/portable.py).
SELECT *,
       (lower(trim(CAST(traffic AS VARCHAR))) NOT IN ('default', 'swap')
        OR coalesce(CAST(user_id AS VARCHAR), '') <> '') AS has_user_id,
       (lower(trim(CAST(traffic AS VARCHAR))) IS DISTINCT FROM 'swap') AS swap_has_donor
FROM raw_flag
