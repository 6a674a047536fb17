"""The data-quality gate: Great Expectations suites run on the frames of every input and output table."""
