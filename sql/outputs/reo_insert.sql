-- Insert the day's new rows of reo from the registered frame `new_rows`.
INSERT INTO reo BY NAME SELECT * FROM new_rows
