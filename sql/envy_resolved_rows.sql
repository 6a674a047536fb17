-- Envy swap-row donor groups resolved (DESIGN §4.7; seed 004 App. B eq. 6),
-- written once for sql/envy_group_counts.sql and
-- sql/envy_unresolved_donors.sql (each includes this query as a subquery,
-- pipelines/storage/db.py sql_text): one row per staged row of the audit
-- window $start..$ds (the files those days need now, `envy_files`) and
-- group-envy attribute, with the row's number (rid), day, target user and
-- group, donor, n, n_pos, whether it is a swap row (is_swap: it names a donor
-- user or a donor group) and its donor group resolved, first found first: the
-- donor user's row of the user attribute table (`envy_user_attributes`:
-- user_id, attribute, grp; config `envy.user_table`, empty without one), the
-- donor's own rows anywhere in the window (any day, as target, or its
-- random-traffic rows, staged with n = 0 for this), its
-- policy_group when the attribute is $group_attribute; null when none of
-- them resolves it (and for default traffic). Null attribute values are
-- '(missing)' (for donors as for targets).
WITH w AS (
    SELECT row_number() OVER () AS rid, ds, user_id, donor_user_id, donor_group, n, n_pos, COLUMNS('^attr__')
    FROM envy_rows
    WHERE ds BETWEEN $start AND $ds AND src_file IN (SELECT file FROM envy_files)
),
long AS (
    SELECT rid, ds, user_id, donor_user_id, donor_group, n, n_pos,
           regexp_replace(attribute, '^attr__', '') AS attribute, coalesce(grp, '(missing)') AS grp
    FROM w UNPIVOT INCLUDE NULLS (grp FOR attribute IN (COLUMNS('^attr__')))
),
users AS (
    SELECT user_id, attribute, max(grp) AS grp FROM long GROUP BY user_id, attribute
)
SELECT l.*,
       CASE WHEN l.donor_user_id IS NULL AND l.donor_group IS NULL THEN NULL
            ELSE coalesce(t.grp, u.grp, CASE WHEN l.attribute = $group_attribute THEN l.donor_group END)
       END AS resolved_group,
       l.donor_user_id IS NOT NULL OR l.donor_group IS NOT NULL AS is_swap
FROM long AS l
LEFT JOIN envy_user_attributes AS t ON t.user_id = l.donor_user_id AND t.attribute = l.attribute
LEFT JOIN users AS u ON u.user_id = l.donor_user_id AND u.attribute = l.attribute
