-- Append the normalised frame `staged` to labels (columns matched by name).
INSERT INTO labels BY NAME SELECT * FROM staged
