-- Group envy (DESIGN §4.7; seed 004 App. B eq. 6): per attribute, target
-- group and donor group, the rows and positives of the day ($ds, is_day) and
-- of the audit window $start..$ds, from the staged rows of the files those
-- days need now (`envy_files`). Default-traffic rows (the users' own
-- policies; only the own-policy diagnostic uses them) have a null donor_group.
-- Every swap row has a donor group, also one whose donor is the user: eq. 6
-- draws the donor uniformly from g' (for g' = g, m itself included), and
-- U(g, g) of Def. B.1 is the (g, g) swap cell, not default traffic. A swap
-- row's donor group is resolved, first found first: the donor user's row of
-- the user attribute table (`envy_user_attributes`: user_id, attribute, grp;
-- config `envy.user_table`, empty without one), the donor's own rows
-- anywhere in the window (any day, as target), its policy_group when the
-- attribute is $group_attribute. A swap row resolved by none of them is left
-- out here and counted by sql/envy_unresolved_donors.sql (the
-- swap_donor_group_resolved check), never put in a `(missing)` donor group.
-- Null attribute values are '(missing)' (for donors as for targets).
WITH w AS (
    SELECT ds, user_id, donor_user_id, donor_group, n, n_pos, COLUMNS('^attr__')
    FROM envy_rows
    WHERE ds BETWEEN $start AND $ds AND src_file IN (SELECT file FROM envy_files)
),
long AS (
    SELECT ds, user_id, donor_user_id, donor_group, n, n_pos,
           regexp_replace(attribute, '^attr__', '') AS attribute, coalesce(grp, '(missing)') AS grp
    FROM w UNPIVOT INCLUDE NULLS (grp FOR attribute IN (COLUMNS('^attr__')))
),
users AS (
    SELECT user_id, attribute, max(grp) AS grp FROM long GROUP BY user_id, attribute
),
resolved AS (
    SELECT l.*,
           CASE WHEN l.donor_user_id IS NULL AND l.donor_group IS NULL THEN NULL
                ELSE coalesce(t.grp, u.grp, CASE WHEN l.attribute = $group_attribute THEN l.donor_group END)
           END AS resolved_group,
           l.donor_user_id IS NOT NULL OR l.donor_group IS NOT NULL AS is_swap
    FROM long AS l
    LEFT JOIN envy_user_attributes AS t ON t.user_id = l.donor_user_id AND t.attribute = l.attribute
    LEFT JOIN users AS u ON u.user_id = l.donor_user_id AND u.attribute = l.attribute
)
SELECT attribute,
       grp AS "group",
       resolved_group AS donor_group,
       ds = $ds AS is_day,
       sum(n)::BIGINT AS n,
       sum(n_pos)::BIGINT AS n_pos
FROM resolved
WHERE NOT is_swap OR resolved_group IS NOT NULL
GROUP BY ALL
ORDER BY ALL
