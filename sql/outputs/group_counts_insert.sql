-- Insert the day's new rows of group_counts from the registered frame `new_rows`.
INSERT INTO group_counts BY NAME SELECT * FROM new_rows
