"""SQL statements fairmon runs (package data; see fairmon.resources)."""
