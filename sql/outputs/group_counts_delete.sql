-- Drop day $ds of group_counts before its new rows are inserted (same transaction).
DELETE FROM group_counts WHERE ds = $ds
