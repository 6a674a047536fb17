"""fairmon's library face (DESIGN §1 "A library first"): the estimators on
pandas, Polars or PyArrow frames. Import the functions from :mod:`fairmon`
(``fairmon.reo``, ``fairmon.group_counts``, ...); this package holds their
implementations, which adapt frames and call :mod:`fairmon.transforms`."""
