-- Insert the day's new rows of dq_results from the registered frame `new_rows`.
INSERT INTO dq_results BY NAME SELECT * FROM new_rows
