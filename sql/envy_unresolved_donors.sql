-- The swap_donor_group_resolved check (DESIGN §4.7): the swap rows of the
-- audit window $start..$ds whose donor group sql/envy_group_counts.sql cannot
-- resolve for at least one of the group-envy attributes $attributes (no row of the donor in the user
-- attribute table `envy_user_attributes`, no own row of the donor anywhere in
-- the window, and no policy_group for the attribute $group_attribute), per
-- donor: its policy_user_id (null when the row names only a policy_group),
-- policy_group, the attributes left unresolved, and the rows of the day
-- (n_day) and of the window (n_window). Each staged row counts once, however
-- many attributes it misses. Same resolution as sql/envy_group_counts.sql.
WITH w AS (
    SELECT row_number() OVER () AS rid, ds, user_id, donor_user_id, donor_group, n, COLUMNS('^attr__')
    FROM envy_rows
    WHERE ds BETWEEN $start AND $ds AND src_file IN (SELECT file FROM envy_files)
),
long AS (
    SELECT rid, ds, user_id, donor_user_id, donor_group, n,
           regexp_replace(attribute, '^attr__', '') AS attribute, coalesce(grp, '(missing)') AS grp
    FROM w UNPIVOT INCLUDE NULLS (grp FOR attribute IN (COLUMNS('^attr__')))
),
users AS (
    SELECT user_id, attribute, max(grp) AS grp FROM long GROUP BY user_id, attribute
),
unresolved AS (
    SELECT l.rid, any_value(l.ds) AS ds, any_value(l.n) AS n,
           any_value(l.donor_user_id) AS donor_user_id, any_value(l.donor_group) AS policy_group,
           string_agg(DISTINCT l.attribute, ', ' ORDER BY l.attribute) AS attributes
    FROM long AS l
    LEFT JOIN envy_user_attributes AS t ON t.user_id = l.donor_user_id AND t.attribute = l.attribute
    LEFT JOIN users AS u ON u.user_id = l.donor_user_id AND u.attribute = l.attribute
    WHERE (l.donor_user_id IS NOT NULL OR l.donor_group IS NOT NULL)
      AND list_contains($attributes, l.attribute)
      AND t.grp IS NULL AND u.grp IS NULL
      AND NOT (l.attribute = $group_attribute AND l.donor_group IS NOT NULL)
    GROUP BY l.rid
)
SELECT donor_user_id,
       policy_group,
       attributes,
       coalesce(sum(n) FILTER (WHERE ds = $ds), 0)::BIGINT AS n_day,
       sum(n)::BIGINT AS n_window
FROM unresolved
GROUP BY ALL
ORDER BY n_window DESC, donor_user_id NULLS LAST, policy_group, attributes
