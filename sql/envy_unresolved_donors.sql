-- The swap_donor_group_resolved check (DESIGN §4.7): the swap rows of the
-- audit window $start..$ds whose donor group sql/envy_resolved_rows.sql (the
-- resolution sql/envy_group_counts.sql counts with) cannot resolve for at
-- least one of the group-envy attributes $attributes (no row of the donor in
-- the user attribute table `envy_user_attributes`, no own row of the donor
-- anywhere in the window, and no policy_group for the attribute
-- $group_attribute), per donor: its policy_user_id (null when the row names
-- only a policy_group), policy_group, the attributes left unresolved, and the
-- rows of the day (n_day) and of the window (n_window). Each staged row
-- counts once, however many attributes it misses.
WITH resolved AS (
{{include envy_resolved_rows}}
),
unresolved AS (
    SELECT rid, any_value(ds) AS ds, any_value(n) AS n,
           any_value(donor_user_id) AS donor_user_id, any_value(donor_group) AS policy_group,
           string_agg(DISTINCT attribute, ', ' ORDER BY attribute) AS attributes
    FROM resolved
    WHERE is_swap AND resolved_group IS NULL AND list_contains($attributes, attribute)
    GROUP BY rid
)
SELECT donor_user_id,
       policy_group,
       attributes,
       coalesce(sum(n) FILTER (WHERE ds = $ds), 0)::BIGINT AS n_day,
       sum(n)::BIGINT AS n_window
FROM unresolved
GROUP BY ALL
ORDER BY n_window DESC, donor_user_id NULLS LAST, policy_group, attributes
