"""fairmon transforms: pure Polars transforms and NumPy/SciPy estimators.
No Prefect, no I/O: everything here is a function of its arguments."""
