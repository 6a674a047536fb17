"""Great Expectations suites, one JSON file per input and output table (package data; see fairmon.resources)."""
