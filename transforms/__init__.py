"""fairmon transforms: pure Polars transforms and NumPy/SciPy estimators.
No Prefect, no I/O: everything here is a function of its arguments.

``scipy.stats`` is imported inside the functions that use it, not at the top
of their modules: it takes ~0.75 s to import, and a command that loads the
flows then reached its first scan that much later. A run imports it anyway
(Great Expectations does, in the background thread that loads it while the
files are scanned), and an import of a loaded module costs a dictionary
lookup (bench/README "Issue 21, fourth steps")."""
