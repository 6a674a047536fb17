-- Group envy (DESIGN §4.7; seed 004 App. B eq. 6): per attribute, target
-- group and donor group, the rows and positives of the day ($ds, is_day) and
-- of the audit window $start..$ds, from the staged rows of the files those
-- days need now (`envy_files`). Default-traffic rows (the users' own
-- policies; only the own-policy diagnostic uses them) have a null donor_group.
-- Every swap row has a donor group, also one whose donor is the user: eq. 6
-- draws the donor uniformly from g' (for g' = g, m itself included), and
-- U(g, g) of Def. B.1 is the (g, g) swap cell, not default traffic. A swap
-- row's donor group is the donor user's own group for that attribute (from
-- any of the donor's rows in the window), else its policy_group when the
-- attribute is $group_attribute, else '(missing)'. Null attribute values are
-- '(missing)'.
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
)
SELECT l.attribute,
       l.grp AS "group",
       CASE WHEN l.donor_user_id IS NULL AND l.donor_group IS NULL THEN NULL
            ELSE coalesce(u.grp, CASE WHEN l.attribute = $group_attribute THEN l.donor_group END, '(missing)')
       END AS donor_group,
       l.ds = $ds AS is_day,
       sum(l.n)::BIGINT AS n,
       sum(l.n_pos)::BIGINT AS n_pos
FROM long AS l LEFT JOIN users AS u ON u.user_id = l.donor_user_id AND u.attribute = l.attribute
GROUP BY ALL
ORDER BY ALL
