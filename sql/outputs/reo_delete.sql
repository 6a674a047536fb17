-- Drop day $ds of reo before its new rows are inserted (same transaction).
DELETE FROM reo WHERE ds = $ds
