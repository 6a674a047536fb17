-- Append the frame `envy_staged` (columns matched by name).
INSERT INTO envy_rows BY NAME SELECT * FROM envy_staged
