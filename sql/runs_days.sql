-- Days that have been run at least once.
SELECT DISTINCT ds FROM runs ORDER BY ds
