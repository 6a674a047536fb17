-- Insert the day's new rows of threshold_prevalence from the registered frame `new_rows`.
INSERT INTO threshold_prevalence BY NAME SELECT * FROM new_rows
