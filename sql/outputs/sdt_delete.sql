-- Drop day $ds of sdt before its new rows are inserted (same transaction).
DELETE FROM sdt WHERE ds = $ds
