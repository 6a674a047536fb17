-- Append the normalised frame `staged` (columns matched by name).
INSERT INTO impressions BY NAME SELECT * FROM staged
