-- Drop day $ds of threshold_prevalence_diff before its new rows are inserted (same transaction).
DELETE FROM threshold_prevalence_diff WHERE ds = $ds
