-- Confusion counts of labels against gold labels in the window $window_start..$ds,
-- per attribute x group x labeler and for all labelers together (labeler_id '*').
-- Rows without a gold label count in no cell (DESIGN §2 labels), but their group and labeler
-- still get a row: all-zero cells, so a window without gold labels gives NaN rows with a
-- reason rather than nothing. Only rows of the files the day needs now ($files). Attribute
-- columns are attr__*.
WITH src AS (
    SELECT labeler_id, label, gold_label, COLUMNS('^attr__')
    FROM labels
    WHERE ds BETWEEN $window_start AND $ds AND list_contains($files, src_file) AND label IS NOT NULL
),
long AS (
    SELECT labeler_id, label, gold_label, attribute, grp
    FROM src UNPIVOT INCLUDE NULLS (grp FOR attribute IN (COLUMNS('^attr__')))
)
SELECT regexp_replace(attribute, '^attr__', '') AS attribute,
       coalesce(grp, '(missing)') AS "group",
       CASE WHEN grouping(labeler_id) = 1 THEN '*' ELSE labeler_id END AS labeler_id,
       count(*) FILTER (WHERE label AND gold_label)::BIGINT AS tp,
       count(*) FILTER (WHERE NOT label AND gold_label)::BIGINT AS fn,
       count(*) FILTER (WHERE label AND NOT gold_label)::BIGINT AS fp,
       count(*) FILTER (WHERE NOT label AND NOT gold_label)::BIGINT AS tn
FROM long
GROUP BY GROUPING SETS ((attribute, grp, labeler_id), (attribute, grp))
ORDER BY attribute, "group", labeler_id
