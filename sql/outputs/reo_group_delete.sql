-- Drop day $ds of reo_group before its new rows are inserted (same transaction).
DELETE FROM reo_group WHERE ds = $ds
