-- Insert the day's new rows of threshold_prevalence_diff from the registered frame `new_rows`.
INSERT INTO threshold_prevalence_diff BY NAME SELECT * FROM new_rows
