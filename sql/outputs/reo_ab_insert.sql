-- Insert the day's new rows of reo_ab from the registered frame `new_rows`.
INSERT INTO reo_ab BY NAME SELECT * FROM new_rows
