-- Insert the day's new rows of sdt from the registered frame `new_rows`.
INSERT INTO sdt BY NAME SELECT * FROM new_rows
