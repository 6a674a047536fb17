-- Envy audit (DESIGN §4.7; seed 004 Alg. 1-2): per target user and serving
-- policy, the rows (n) and positive rewards (reward_sum) accumulated from
-- $start to $ds, from the staged rows of the files those days need now
-- (`envy_files`, file VARCHAR: DESIGN §2 "Input identity").
-- donor: null for the user's own policy (default traffic, or a swap row whose
-- donor is the user), else the donor user whose policy served the swap row.
-- Swap rows that name only a donor group are not per-user arms (they count in
-- sql/envy_group_counts.sql). Targets: users with at least one donor row.
WITH agg AS (
    SELECT user_id,
           CASE WHEN donor_user_id IS NULL OR donor_user_id = user_id THEN NULL ELSE donor_user_id END AS donor,
           sum(n)::BIGINT AS n,
           sum(n_pos)::BIGINT AS reward_sum
    FROM envy_rows
    WHERE ds BETWEEN $start AND $ds AND src_file IN (SELECT file FROM envy_files)
      AND NOT (donor_user_id IS NULL AND donor_group IS NOT NULL)
      AND n > 0  -- random-traffic rows (n = 0) only tell a user's groups
    GROUP BY ALL
)
SELECT user_id, donor, n, reward_sum
FROM agg
QUALIFY bool_or(donor IS NOT NULL) OVER (PARTITION BY user_id)
