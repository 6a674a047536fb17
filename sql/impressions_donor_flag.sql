-- With [envy] (DESIGN §4.7): the impressions rows registered as `raw_flag`
-- (a file with a user_id column) plus two flags the profile groups by, so the
-- raw suite reports the first offending file row:
--   has_user_id     false on a default or swap row without a user_id;
--   swap_has_donor  false on a swap row that names neither a donor user
--                   (policy_user_id) nor a donor group (policy_group), the
--                   columns of the file among them ({{donors}}).
-- An empty id counts as missing. (sql/impressions_donor_flag_none.sql: a file
-- with neither donor column.) Portable (pipelines/storage/portable.py).
SELECT *,
       (lower(trim(CAST(traffic AS VARCHAR))) NOT IN ('default', 'swap')
        OR coalesce(CAST(user_id AS VARCHAR), '') <> '') AS has_user_id,
       (lower(trim(CAST(traffic AS VARCHAR))) IS DISTINCT FROM 'swap'
        OR concat_ws('', {{donors:text}}) <> '')
       AS swap_has_donor
FROM raw_flag
