-- Per-group counts n and n_pos (Y = 1) for day $ds, one row per
-- traffic x arm x attribute x group (DESIGN §3 group_counts).
-- Default and other named stages: rows of the day, by arm.
-- Random traffic: every pooled range overlapping the trailing window
-- $window_start..$ds, shared by all arms (arm = 'all').
-- Staged rows carry n, the logged pairs they stand for (transforms/contract.py).
-- Rows are first aggregated over all attribute columns at once (one scan),
-- then unpivoted: attribute columns are the staging columns named attr__*.
-- A null attribute value is counted as the group '(missing)'.
WITH src AS (
    SELECT traffic, arm, y, n, ds_start, ds, COLUMNS('^attr__')
    FROM impressions
    WHERE ds = $ds AND ds_start = $ds AND traffic <> 'random'
    UNION ALL BY NAME
    SELECT traffic, 'all' AS arm, y, n, ds_start, ds, COLUMNS('^attr__')
    FROM impressions
    WHERE traffic = 'random' AND ds_start <= $ds AND ds >= $window_start
),
pre AS (
    SELECT traffic, arm, COLUMNS('^attr__'),
           sum(n) AS n, coalesce(sum(n) FILTER (WHERE y), 0) AS n_pos,
           min(ds_start) AS ws, max(ds) AS we
    FROM src
    GROUP BY ALL
),
spans AS (
    SELECT traffic, arm, min(ws) AS window_start, max(we) AS window_end
    FROM pre
    GROUP BY traffic, arm
),
long AS (
    SELECT traffic, arm, attribute, grp, n, n_pos
    FROM pre UNPIVOT INCLUDE NULLS (grp FOR attribute IN (COLUMNS('^attr__')))
)
SELECT $ds::DATE AS ds,
       'impressions' AS source,
       l.traffic,
       l.arm,
       regexp_replace(l.attribute, '^attr__', '') AS attribute,
       coalesce(l.grp, '(missing)') AS "group",
       sum(l.n)::BIGINT AS n,
       sum(l.n_pos)::BIGINT AS n_pos,
       any_value(s.window_start) AS window_start,
       any_value(s.window_end) AS window_end
FROM long AS l JOIN spans AS s USING (traffic, arm)
GROUP BY l.traffic, l.arm, l.attribute, coalesce(l.grp, '(missing)')
ORDER BY l.traffic, l.arm, attribute, "group"
