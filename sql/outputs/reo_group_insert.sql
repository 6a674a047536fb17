-- Insert the day's new rows of reo_group from the registered frame `new_rows`.
INSERT INTO reo_group BY NAME SELECT * FROM new_rows
