-- A day was recomputed and published: it is no longer stale.
DELETE FROM stale_days WHERE ds = $ds
