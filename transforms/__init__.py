"""fairmon transforms: pure Polars transforms and NumPy/SciPy estimators.
No Prefect, no I/O: everything here is a function of its arguments.

``scipy.stats`` is imported inside the functions that use it, not at the top
of their modules: it takes ~0.75 s to import, and a command that loads the
flows then reached its first scan that much later (bench/README.md). A daily REO run needs none of it: its normal and χ²
functions come from ``scipy.special`` (:mod:`fairmon.transforms.distributions`),
and Great Expectations imports with ``scipy.stats`` deferred
(:mod:`fairmon.pipelines.checks.gx_import`), so a TikTok-size day never
loads it (bench/README.md)."""
