-- Append the normalised frame `staged` to scores (columns matched by name).
INSERT INTO scores BY NAME SELECT * FROM staged
