-- Drop day $ds of reo_ab before its new rows are inserted (same transaction).
DELETE FROM reo_ab WHERE ds = $ds
