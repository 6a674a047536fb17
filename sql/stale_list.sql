-- Stale days in $start..$end and the files that made them stale.
SELECT ds, string_agg(file, ', ' ORDER BY file) AS files FROM stale_days
WHERE ds BETWEEN $start AND $end GROUP BY ds ORDER BY ds
