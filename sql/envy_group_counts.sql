-- Group envy (DESIGN §4.7; seed 004 App. B eq. 6): per attribute, target
-- group, donor group and target user (eq. 6 averages the users' means, so
-- each cell keeps its users apart), the rows and positives of the day ($ds,
-- is_day) and of the audit window $start..$ds, from the staged rows of the files those
-- days need now (`envy_files`). Default-traffic rows (the users' own
-- policies; only the own-policy diagnostic uses them) have a null donor_group.
-- Every swap row has a donor group, also one whose donor is the user: eq. 6
-- draws the donor uniformly from g' (for g' = g, m itself included), and
-- U(g, g) of Def. B.1 is the (g, g) swap cell, not default traffic. A swap
-- row's donor group is resolved as sql/envy_resolved_rows.sql says (user
-- attribute table, the donor's own rows in the window, its policy_group for
-- $group_attribute). A swap row resolved by none of them is left out here and
-- counted by sql/envy_unresolved_donors.sql (the swap_donor_group_resolved
-- check), never put in a `(missing)` donor group.
WITH resolved AS (
{{include envy_resolved_rows}}
)
SELECT attribute,
       grp AS "group",
       resolved_group AS donor_group,
       user_id,
       ds = $ds AS is_day,
       sum(n)::BIGINT AS n,
       sum(n_pos)::BIGINT AS n_pos
FROM resolved
WHERE (NOT is_swap OR resolved_group IS NOT NULL)
  AND n > 0  -- random-traffic rows (n = 0) only tell a user's groups
GROUP BY ALL
ORDER BY ALL
