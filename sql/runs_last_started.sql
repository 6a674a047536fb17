-- When the project's latest run started (UTC): alerts first seen after it are what that run changed.
SELECT max(started_at) AS started_at FROM runs
