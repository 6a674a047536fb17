-- Drop day $ds of dq_results before its new rows are inserted (same transaction).
DELETE FROM dq_results WHERE ds = $ds
