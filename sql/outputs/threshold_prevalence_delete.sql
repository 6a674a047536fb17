-- Drop day $ds of threshold_prevalence before its new rows are inserted (same transaction).
DELETE FROM threshold_prevalence WHERE ds = $ds
